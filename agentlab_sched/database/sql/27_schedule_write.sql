-- Schedules, the triggers of a write: validation of a new schedule or a changed definition, the
-- bookkeeping-only check, the guard of schedules defined in code, the audit rows (schedule_changes) and the
-- NOTIFY to the workers. Re-applied by every migrate (CREATE OR REPLACE).
--
-- Definition and bookkeeping. Every column of a schedule is part of its definition except the ones the
-- scheduler maintains itself while firing: next_run_at, replan, replan_at, resolving_until,
-- consecutive_failures, session_key (and version, updated_at). A change to the definition is validated,
-- bumps version and updated_at, writes one schedule_changes row and NOTIFYs the workers; a
-- bookkeeping-only update (a tick advancing next_run_at) does none of that, so firing stays cheap and
-- the audit trail readable.

-- A new schedule (`o` NULL) or a change of one's definition, checked: each field that changed (all of
-- them for a new one), with the same checks and messages as the functions below; the CHECK constraints
-- stay as the last line. Raises the first problem found.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_schedule(n agentlab_sched.schedules, o agentlab_sched.schedules)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ins boolean := o.id IS NULL;
    bad text;
    opt agentlab_sched.schedule_options;
    new_values jsonb;
    old_values jsonb;
BEGIN
    IF ins OR n.name IS DISTINCT FROM o.name THEN
        PERFORM agentlab_sched.validate_text('name', n.name, 200);
    END IF;
    IF ins OR n.cron IS DISTINCT FROM o.cron THEN
        IF n.cron IS NULL THEN
            PERFORM agentlab_sched.validate_text('cron', NULL, 0);
        END IF;
        PERFORM agentlab_sched.check_cron(n.cron);
    END IF;
    IF ins OR n.timezone IS DISTINCT FROM o.timezone THEN
        IF n.timezone IS NULL THEN
            PERFORM agentlab_sched.validate_text('timezone', NULL, 0);
        END IF;
        PERFORM agentlab_sched.check_timezone(n.timezone);
    END IF;
    IF ins OR n.task IS DISTINCT FROM o.task THEN
        PERFORM agentlab_sched.validate_text('task', n.task, 200, true, true);
    END IF;
    IF ins OR n.inputs IS DISTINCT FROM o.inputs THEN
        IF n.inputs IS NULL THEN
            PERFORM agentlab_sched.validate_text('inputs', NULL, 0);
        END IF;
        IF jsonb_typeof(n.inputs) <> 'object' THEN
            PERFORM agentlab_sched.fail('schedule.not_object', 'inputs', jsonb_build_object(
                'field', agentlab_sched.field_term('inputs'),
                'type', jsonb_build_object('msg', 'schedule.json.' || jsonb_typeof(n.inputs))));
        END IF;
        -- Copied into every fire (ledger row, run, job): kept small.
        PERFORM agentlab_sched.check_size('inputs', n.inputs, 'inputs_bytes');
        -- Placeholders ({{ schedule.date }}, ...) must be known to the renderer (41_render.sql).
        PERFORM agentlab_sched.check_inputs(n.inputs);
    END IF;
    -- A built-in task's inputs (the sql task: its shape and who may run SQL as whom, 32_sql_task.sql). A
    -- sql schedule's name is rendered into its command ({{ schedule.name }}): renaming one is the
    -- privilege of changing its command.
    IF ins OR n.task IS DISTINCT FROM o.task OR n.inputs IS DISTINCT FROM o.inputs
       OR (n.name IS DISTINCT FROM o.name AND n.task = agentlab_sched.sql_task_name()) THEN
        PERFORM agentlab_sched.check_task_inputs(n.task, n.inputs);
    END IF;
    -- A task no live worker has registered is accepted (the worker may start later) with a warning: its
    -- fires would be refused until one does (42_launch.sql).
    IF (ins OR n.task IS DISTINCT FROM o.task) AND n.task IS NOT NULL
       AND NOT agentlab_sched.task_registered(n.task) THEN
        RAISE WARNING USING
            MESSAGE = agentlab_sched.msg('schedule.task_not_registered', jsonb_build_object('task', n.task)),
            DETAIL = jsonb_build_object('code', 'schedule.task_not_registered', 'field', 'task',
                                        'params', jsonb_build_object('task', n.task))::text;
    END IF;
    -- Every option by its row of schedule_options (the copy of core/options.py), in table order.
    new_values := to_jsonb(n);
    old_values := CASE WHEN ins THEN NULL ELSE to_jsonb(o) END;
    FOR opt IN SELECT * FROM agentlab_sched.schedule_options ORDER BY position LOOP
        IF ins OR (new_values -> opt.name) IS DISTINCT FROM (old_values -> opt.name) THEN
            PERFORM agentlab_sched.validate_option(opt, new_values ->> opt.name);
        END IF;
    END LOOP;
    IF (ins OR n.starts_at IS DISTINCT FROM o.starts_at OR n.ends_at IS DISTINCT FROM o.ends_at
            OR n.timezone IS DISTINCT FROM o.timezone)
       AND n.starts_at IS NOT NULL AND n.ends_at IS NOT NULL AND n.starts_at >= n.ends_at THEN
        PERFORM agentlab_sched.fail('schedule.window', 'ends_at', jsonb_build_object(
            'starts_at', agentlab_sched.local_time_text(n.starts_at, n.timezone),
            'ends_at', agentlab_sched.local_time_text(n.ends_at, n.timezone),
            'timezone', n.timezone));
    END IF;
    IF (ins OR n.paused_reason IS DISTINCT FROM o.paused_reason) AND char_length(n.paused_reason) > 1000 THEN
        PERFORM agentlab_sched.fail('schedule.too_long', 'paused_reason', jsonb_build_object(
            'field', agentlab_sched.field_term('paused_reason'),
            'length', char_length(n.paused_reason), 'max', 1000));
    END IF;
    IF ins OR n.webhook_format IS DISTINCT FROM o.webhook_format THEN
        PERFORM agentlab_sched.validate_choice('webhook_format', n.webhook_format,
                                               ARRAY['generic', 'feishu', 'wecom', 'dingtalk'], false);
    END IF;
    IF ins OR n.webhook_events IS DISTINCT FROM o.webhook_events THEN
        IF n.webhook_events IS NULL THEN
            PERFORM agentlab_sched.validate_text('webhook_events', NULL, 0);
        END IF;
        SELECT e INTO bad FROM unnest(n.webhook_events) AS e
        WHERE e IS NULL OR e <> ALL (ARRAY['finished', 'failed', 'awaiting_approval']) LIMIT 1;
        IF FOUND THEN
            PERFORM agentlab_sched.validate_choice('webhook_events', coalesce(bad, ''),
                                                   ARRAY['finished', 'failed', 'awaiting_approval']);
        END IF;
    END IF;
    -- What the webhook's URL may be shown as (made by Python from the URL): short and printable.
    IF ins OR n.webhook_url_hint IS DISTINCT FROM o.webhook_url_hint THEN
        PERFORM agentlab_sched.validate_text('webhook_url_hint', n.webhook_url_hint,
                                             agentlab_sched.size_limit('webhook_url_hint_chars'), false);
    END IF;
    -- URL and secret are Fernet ciphertext made in Python with a key the database never holds.
    IF (ins OR n.webhook_url_enc IS DISTINCT FROM o.webhook_url_enc)
       AND n.webhook_url_enc IS NOT NULL AND n.webhook_url_enc NOT LIKE 'gAAAAA%' THEN
        PERFORM agentlab_sched.fail('schedule.plaintext_secret', 'webhook_url',
                                    jsonb_build_object('field', agentlab_sched.field_term('webhook_url')));
    END IF;
    IF (ins OR n.webhook_secret_enc IS DISTINCT FROM o.webhook_secret_enc)
       AND n.webhook_secret_enc IS NOT NULL AND n.webhook_secret_enc NOT LIKE 'gAAAAA%' THEN
        PERFORM agentlab_sched.fail('schedule.plaintext_secret', 'webhook_secret',
                                    jsonb_build_object('field', agentlab_sched.field_term('webhook_secret')));
    END IF;
END
$$;

-- The row `n` would be with only its definition changed: the columns the scheduler keeps while firing
-- (next_run_at, replan, replan_at, resolving_until, consecutive_failures, session_key, version,
-- updated_at) taken back to `o`'s, and so is the bookkeeping a mark of this transaction announces (a
-- launch counting remaining_runs down, the re-encryption of the webhook with the newest key: only the
-- owner can write a mark). Equal to `o` when the update is bookkeeping only. Consumes the marks it uses.
CREATE OR REPLACE FUNCTION agentlab_sched.schedule_definition(n agentlab_sched.schedules, o agentlab_sched.schedules)
RETURNS agentlab_sched.schedules
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    same agentlab_sched.schedules := n;
BEGIN
    same.next_run_at := o.next_run_at;
    same.replan := o.replan;
    same.consecutive_failures := o.consecutive_failures;
    same.session_key := o.session_key;
    same.replan_at := o.replan_at;
    same.resolving_until := o.resolving_until;
    IF n.remaining_runs IS DISTINCT FROM o.remaining_runs AND n.remaining_runs = greatest(o.remaining_runs - 1, 0) THEN
        IF agentlab_sched.take_mark(o.id, 'countdown') THEN
            same.remaining_runs := o.remaining_runs;
        END IF;
    END IF;
    IF (n.webhook_url_enc IS DISTINCT FROM o.webhook_url_enc
        OR n.webhook_secret_enc IS DISTINCT FROM o.webhook_secret_enc)
       AND (n.webhook_url_enc IS NULL) = (o.webhook_url_enc IS NULL)
       AND (n.webhook_secret_enc IS NULL) = (o.webhook_secret_enc IS NULL) THEN
        IF agentlab_sched.take_mark(o.id, 'rotate') THEN
            same.webhook_url_enc := o.webhook_url_enc;
            same.webhook_secret_enc := o.webhook_secret_enc;
        END IF;
    END IF;
    same.version := o.version;
    same.updated_at := o.updated_at;
    -- Generated from the ciphertext (compared above), and not computed yet in a BEFORE trigger.
    same.webhook_configured := o.webhook_configured;
    same.webhook_has_secret := o.webhook_has_secret;
    RETURN same;
END
$$;

-- A schedule defined in code (`o`): its definition (`definition`, see schedule_definition) is the
-- code's, changed only by a sync of that code (its transaction's mark, 34_code.sql); pausing and resuming
-- stay open. Raises schedule.defined_in_code for any other change.
CREATE OR REPLACE FUNCTION agentlab_sched.guard_defined_in_code(definition agentlab_sched.schedules,
                                                                o agentlab_sched.schedules)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    same agentlab_sched.schedules := definition;
BEGIN
    IF o.defined_in IS NULL OR agentlab_sched.in_code_sync() THEN
        RETURN;
    END IF;
    same.enabled := o.enabled;
    same.paused_reason := o.paused_reason;
    same.paused_reason_code := o.paused_reason_code;
    same.paused_reason_params := o.paused_reason_params;
    same.paused_at := o.paused_at;
    IF same IS DISTINCT FROM o THEN
        PERFORM agentlab_sched.fail('schedule.defined_in_code', 'name', jsonb_build_object(
            'name', o.name, 'where', o.defined_in));
    END IF;
END
$$;

-- BEFORE INSERT OR UPDATE on schedules: a bookkeeping-only update (a tick advancing next_run_at,
-- counting failures) passes with nothing validated; anything else is guarded (defined in code) and
-- validated, then this keeps the bookkeeping right (version, updated_at, paused_*, next_run_at, replan).
CREATE OR REPLACE FUNCTION agentlab_sched.schedules_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ins boolean := TG_OP = 'INSERT';
    same agentlab_sched.schedules%ROWTYPE;
BEGIN
    -- schedule_many() validated its rows set-based and made each as stored (31_bulk.sql).
    IF ins THEN
        IF agentlab_sched.in_bulk_insert() THEN
            RETURN NEW;
        END IF;
    END IF;
    IF NEW.cron IS NOT NULL AND (ins OR NEW.cron IS DISTINCT FROM OLD.cron) THEN
        NEW.cron := agentlab_sched.cron_spelling(NEW.cron);
    END IF;

    -- Bookkeeping is checked too (consecutive_failures and replan by their CHECK constraints).
    IF NEW.session_key IS NOT NULL AND (ins OR NEW.session_key IS DISTINCT FROM OLD.session_key) THEN
        PERFORM agentlab_sched.validate_text('session_key', NEW.session_key, 200, false);
    END IF;
    IF NOT ins THEN
        -- Kept by this trigger, never set: an UPDATE that tries is refused rather than silently ignored.
        IF NEW.version IS DISTINCT FROM OLD.version THEN
            PERFORM agentlab_sched.fail('schedule.read_only', 'version', jsonb_build_object(
                'field', agentlab_sched.field_term('version'), 'value', NEW.version));
        END IF;
        IF NEW.created_at IS DISTINCT FROM OLD.created_at THEN
            PERFORM agentlab_sched.fail('schedule.read_only', 'created_at', jsonb_build_object(
                'field', agentlab_sched.field_term('created_at'), 'value', NEW.created_at));
        END IF;
        same := agentlab_sched.schedule_definition(NEW, OLD);
        IF same IS NOT DISTINCT FROM OLD THEN
            -- Bookkeeping only: nothing to validate, no version bump, no audit row.
            NEW.version := OLD.version;
            IF NOT NEW.enabled THEN
                NEW.next_run_at := NULL;
                NEW.replan := NULL;
            END IF;
            -- A re-plan asked for by hand (UPDATE ... SET replan = 'now'): planned from this moment.
            IF NEW.replan IS NOT NULL AND NEW.replan IS DISTINCT FROM OLD.replan
               AND NEW.replan_at IS NOT DISTINCT FROM OLD.replan_at THEN
                NEW.replan_at := clock_timestamp();
            END IF;
            RETURN NEW;
        END IF;
        PERFORM agentlab_sched.guard_defined_in_code(same, OLD);
    END IF;
    PERFORM agentlab_sched.validate_schedule(NEW, CASE WHEN ins THEN NULL ELSE OLD END);

    IF ins THEN
        RETURN agentlab_sched.inserted_schedule(NEW);
    END IF;

    -- A real change of the definition.
    NEW.version := OLD.version + 1;
    NEW.updated_at := now();
    IF NOT NEW.enabled THEN
        -- Disabled: nothing is pending; resuming plans the first fire after that moment.
        NEW.next_run_at := NULL;
        NEW.replan := NULL;
        IF OLD.enabled THEN
            IF NEW.paused_at IS NOT DISTINCT FROM OLD.paused_at THEN
                NEW.paused_at := now();
            END IF;
        END IF;
    ELSIF NOT OLD.enabled THEN
        -- Enabled again (resume): the first due time after this moment; the paused time is never replayed.
        NEW.replan := 'now';
        NEW.replan_at := clock_timestamp();
        NEW.next_run_at := NULL;
        NEW.paused_reason := NULL;
        NEW.paused_reason_code := NULL;
        NEW.paused_reason_params := NULL;
        NEW.paused_at := NULL;
        NEW.consecutive_failures := 0;
    ELSIF NEW.cron IS DISTINCT FROM OLD.cron OR NEW.timezone IS DISTINCT FROM OLD.timezone
          OR NEW.dst_gap IS DISTINCT FROM OLD.dst_gap OR NEW.dst_repeat IS DISTINCT FROM OLD.dst_repeat
          OR NEW.starts_at IS DISTINCT FROM OLD.starts_at OR NEW.ends_at IS DISTINCT FROM OLD.ends_at
          OR (OLD.remaining_runs = 0 AND NEW.remaining_runs IS DISTINCT FROM 0) THEN
        -- The pending due time when it was already past at this moment and the new definition still has
        -- it (a missed fire the change still covers); otherwise the new definition's first due time after
        -- this moment (planner.next_after_change). With nothing pending (never planned, ended, out of
        -- runs): the first due time after this moment.
        NEW.replan := CASE WHEN NEW.next_run_at IS NULL OR OLD.replan = 'now' THEN 'now' ELSE 'pending' END;
        NEW.replan_at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER schedules_before_write
    BEFORE INSERT OR UPDATE ON agentlab_sched.schedules
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.schedules_before_write();

-- BEFORE DELETE: a schedule defined in code is deleted only once the code no longer declares it (it is
-- then paused), or by a sync.
CREATE OR REPLACE FUNCTION agentlab_sched.schedules_before_delete() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF OLD.defined_in IS NOT NULL AND OLD.code_removed_at IS NULL AND NOT agentlab_sched.in_code_sync() THEN
        PERFORM agentlab_sched.fail('schedule.defined_in_code', 'name', jsonb_build_object(
            'name', OLD.name, 'where', OLD.defined_in));
    END IF;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER schedules_before_delete
    BEFORE DELETE ON agentlab_sched.schedules
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.schedules_before_delete();

-- A schedule row as audit data: webhook ciphertext masked.
CREATE OR REPLACE FUNCTION agentlab_sched.schedule_audit_values(s agentlab_sched.schedules) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT to_jsonb(s)
        || jsonb_build_object(
               'webhook_url_enc', CASE WHEN s.webhook_url_enc IS NULL THEN NULL ELSE '***' END,
               'webhook_secret_enc', CASE WHEN s.webhook_secret_enc IS NULL THEN NULL ELSE '***' END)
$$;

-- AFTER INSERT/UPDATE/DELETE: one schedule_changes row per change of a definition, and a NOTIFY on
-- channel agentlab_sched_schedules (payload: the schedule id) so workers re-plan without a restart.
CREATE OR REPLACE FUNCTION agentlab_sched.schedules_after_write() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sid bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.version = OLD.version THEN
        -- Bookkeeping: tell the workers only when a re-plan was asked for.
        IF NEW.replan IS NOT NULL AND NEW.replan IS DISTINCT FROM OLD.replan THEN
            PERFORM pg_notify('agentlab_sched_schedules', sid::text);
        END IF;
        RETURN NULL;
    END IF;
    INSERT INTO agentlab_sched.schedule_changes
        (schedule_id, schedule_name, operation, db_role, application_name, old_values, new_values)
    VALUES (
        sid,
        CASE WHEN TG_OP = 'DELETE' THEN OLD.name ELSE NEW.name END,
        lower(TG_OP),
        session_user,  -- the login role (inside the owner's functions current_user is the owner)
        nullif(current_setting('application_name', true), ''),
        CASE WHEN TG_OP <> 'INSERT' THEN agentlab_sched.schedule_audit_values(OLD) END,
        CASE WHEN TG_OP <> 'DELETE' THEN agentlab_sched.schedule_audit_values(NEW) END);
    PERFORM pg_notify('agentlab_sched_schedules', sid::text);
    RETURN NULL;
END
$$;

-- schedule_many()'s rows are not even queued (a million would be): it writes their audit rows set-based and
-- sends one NOTIFY.
CREATE OR REPLACE TRIGGER schedules_after_write
    AFTER INSERT OR DELETE ON agentlab_sched.schedules
    FOR EACH ROW WHEN (NOT agentlab_sched.in_bulk_insert())
    EXECUTE FUNCTION agentlab_sched.schedules_after_write();

-- Updates: the WHEN clause keeps a tick's bookkeeping (thousands of rows a batch) from even queueing
-- the trigger.
CREATE OR REPLACE TRIGGER schedules_after_update
    AFTER UPDATE ON agentlab_sched.schedules
    FOR EACH ROW
    WHEN (NEW.version <> OLD.version OR (NEW.replan IS NOT NULL AND NEW.replan IS DISTINCT FROM OLD.replan))
    EXECUTE FUNCTION agentlab_sched.schedules_after_write();
