-- Schedules: validation, bookkeeping, audit and NOTIFY triggers, and the SQL admin API
-- (schedule, alter_schedule, unschedule, pause, resume). Reference: docs/sql.md.
--
-- Re-applied by every migrate (CREATE OR REPLACE). A function whose arguments change must be dropped
-- here first (DROP FUNCTION IF EXISTS with the old signature), or the old one stays as an overload.
--
-- Definition and bookkeeping. Every column of a schedule is part of its definition except the ones the
-- scheduler maintains itself while firing: next_run_at, replan, replan_at, resolving_until,
-- consecutive_failures, session_key (and version, updated_at). A change to the definition is validated,
-- bumps version and updated_at, writes one schedule_changes row and NOTIFYs the workers; a
-- bookkeeping-only update (a tick advancing next_run_at) does none of that, so firing stays cheap and
-- the audit trail readable.

-- The localised name of a field, as a message parameter (a term, see messages.term()).
CREATE OR REPLACE FUNCTION agentlab_sched.field_term(field text) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('msg', 'schedule.field.' || field)
$$;

-- Characters nobody means to put in a name: C0/C1 controls, zero-width and bidi controls, BOM.
CREATE OR REPLACE FUNCTION agentlab_sched.invisible_char_pattern() RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT '[[:cntrl:]\u0080-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2064\uFEFF]'
$$;

-- A time in a time zone as YYYY-MM-DD HH:MM (seconds shown only when not zero), as messages.local_time().
CREATE OR REPLACE FUNCTION agentlab_sched.local_time_text(at timestamptz, tz text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT to_char(at AT TIME ZONE tz,
                   CASE WHEN date_trunc('minute', at) = at THEN 'YYYY-MM-DD HH24:MI' ELSE 'YYYY-MM-DD HH24:MI:SS' END)
$$;

-- A short piece of text (a name, a queue, a task): not missing (when required), not empty, at most
-- max_length characters, no control or invisible characters, no leading or trailing spaces; with
-- one_word, no spaces at all.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_text(field text, value text, max_length integer,
                                                        required boolean DEFAULT true,
                                                        one_word boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad text;
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF value = '' THEN
        PERFORM agentlab_sched.fail('schedule.empty', field,
                                    jsonb_build_object('field', agentlab_sched.field_term(field)));
    END IF;
    IF char_length(value) > max_length THEN
        PERFORM agentlab_sched.fail('schedule.too_long', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'length', char_length(value), 'max', max_length));
    END IF;
    bad := substring(value FROM agentlab_sched.invisible_char_pattern());
    IF bad IS NOT NULL THEN
        PERFORM agentlab_sched.fail('schedule.control_char', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field),
            'position', strpos(value, bad),
            'char', 'U+' || lpad(upper(to_hex(ascii(bad))), 4, '0')));
    END IF;
    IF value ~ '^[\s\u00A0\u3000]|[\s\u00A0\u3000]$' THEN
        PERFORM agentlab_sched.fail('schedule.outer_space', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value));
    END IF;
    IF one_word AND value ~ '[\s\u00A0\u3000]' THEN
        PERFORM agentlab_sched.fail('schedule.inner_space', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value));
    END IF;
END
$$;

-- One of a fixed set of values; the message lists them.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_choice(field text, value text, allowed text[],
                                                          required boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF NOT value = ANY (allowed) THEN
        PERFORM agentlab_sched.fail('schedule.unknown_value', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field),
            'value', CASE WHEN char_length(value) > 60 THEN left(value, 60) || '…' ELSE value END,
            'allowed', to_jsonb(allowed)));
    END IF;
END
$$;

-- An interval: 0 or more, or (strictly_positive) more than 0.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_interval(field text, value interval, required boolean,
                                                            strictly_positive boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF value < interval '0' THEN
        PERFORM agentlab_sched.fail('schedule.negative', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', justify_interval(value)::text));
    END IF;
    IF strictly_positive AND value = interval '0' THEN
        PERFORM agentlab_sched.fail('schedule.not_positive', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', justify_interval(value)::text));
    END IF;
END
$$;

-- An integer within [min_value, max_value] (max_value NULL: no upper bound).
CREATE OR REPLACE FUNCTION agentlab_sched.validate_int(field text, value integer, required boolean,
                                                       min_value integer, max_value integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF max_value IS NOT NULL AND (value < min_value OR value > max_value) THEN
        PERFORM agentlab_sched.fail('schedule.out_of_range', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value, 'min', min_value, 'max', max_value));
    END IF;
    IF value < min_value THEN
        PERFORM agentlab_sched.fail('schedule.too_small', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value, 'min', min_value));
    END IF;
END
$$;

-- One option by its row of schedule_options; `value` as text (to_jsonb(row) ->> name), NULL = not set.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_option(opt agentlab_sched.schedule_options, value text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF opt.choices IS NOT NULL THEN
        PERFORM agentlab_sched.validate_choice(opt.name, value, opt.choices, opt.required);
    ELSIF opt.sql_type = 'text' THEN
        PERFORM agentlab_sched.validate_text(opt.name, value, coalesce(opt.max_length, 1000000), opt.required,
                                             opt.one_word);
    ELSIF opt.sql_type = 'integer' THEN
        PERFORM agentlab_sched.validate_int(opt.name, value::integer, opt.required, opt.min_value, opt.max_value);
    ELSIF opt.sql_type = 'interval' THEN
        PERFORM agentlab_sched.validate_interval(opt.name, value::interval, opt.required, opt.positive);
    ELSIF value IS NULL AND opt.required THEN
        PERFORM agentlab_sched.fail('schedule.required', opt.name,
                                    jsonb_build_object('field', agentlab_sched.field_term(opt.name)));
    END IF;
END
$$;

-- The defaults of the options as a schedules row (the other columns NULL): what schedule() creates with.
CREATE OR REPLACE FUNCTION agentlab_sched.option_defaults() RETURNS agentlab_sched.schedules
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_populate_record(NULL::agentlab_sched.schedules,
                                 coalesce(jsonb_object_agg(o.name, o.default_value), '{}'::jsonb))
    FROM agentlab_sched.schedule_options o
$$;

-- Consume the bookkeeping mark of this transaction for schedule `sid` (bookkeeping_marks): true when
-- there was one.
CREATE OR REPLACE FUNCTION agentlab_sched.take_mark(sid bigint, mark text) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH taken AS (
        DELETE FROM agentlab_sched.bookkeeping_marks m
        WHERE m.xact = pg_current_xact_id() AND m.schedule_id = sid AND m.kind = mark
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM taken)
$$;

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
    -- Whitespace inside a cron expression never changes its meaning: store it in one spelling so that
    -- "0  9 * * *" is not a change of "0 9 * * *".
    -- (The separators are the ASCII whitespace the cron parsers split on.)
    IF NEW.cron IS NOT NULL AND (ins OR NEW.cron IS DISTINCT FROM OLD.cron) THEN
        NEW.cron := regexp_replace(btrim(NEW.cron, E' \t\r\n\f\x0B'), '[ \t\r\n\f\v]+', ' ', 'g');
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
    -- schedule_many() validated its rows set-based (31_bulk.sql) and says so with the owner's mark.
    IF NOT (ins AND agentlab_sched.in_bulk_insert()) THEN
        PERFORM agentlab_sched.validate_schedule(NEW, CASE WHEN ins THEN NULL ELSE OLD END);
    END IF;

    IF ins THEN
        NEW.version := 1;
        IF NOT NEW.enabled THEN
            NEW.next_run_at := NULL;
            NEW.replan := NULL;
            NEW.paused_at := coalesce(NEW.paused_at, now());
        END IF;
        -- The first fire is planned after the moment it was created, not after the tick that plans it.
        IF NEW.replan IS NOT NULL THEN
            NEW.replan_at := coalesce(NEW.replan_at, clock_timestamp());
        END IF;
        RETURN NEW;
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
    IF TG_OP = 'INSERT' AND agentlab_sched.in_bulk_insert() THEN
        RETURN NULL;  -- schedule_many() writes the audit rows set-based and sends one NOTIFY
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

CREATE OR REPLACE TRIGGER schedules_after_write
    AFTER INSERT OR DELETE ON agentlab_sched.schedules
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.schedules_after_write();

-- Updates: the WHEN clause keeps a tick's bookkeeping (thousands of rows a batch) from even queueing
-- the trigger.
CREATE OR REPLACE TRIGGER schedules_after_update
    AFTER UPDATE ON agentlab_sched.schedules
    FOR EACH ROW
    WHEN (NEW.version <> OLD.version OR (NEW.replan IS NOT NULL AND NEW.replan IS DISTINCT FROM OLD.replan))
    EXECUTE FUNCTION agentlab_sched.schedules_after_write();

-- The schedule called `name`, locked as `lock` says ('update', 'no key update'; NULL: not locked), or
-- schedule.not_found naming it: what every function that acts on a schedule by name starts with.
CREATE OR REPLACE FUNCTION agentlab_sched.find_schedule(name text, lock text DEFAULT NULL)
RETURNS agentlab_sched.schedules
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s agentlab_sched.schedules;
BEGIN
    IF lock = 'update' THEN
        SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = find_schedule.name FOR UPDATE;
    ELSIF lock = 'no key update' THEN
        SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = find_schedule.name FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = find_schedule.name;
    END IF;
    IF NOT FOUND THEN
        PERFORM agentlab_sched.fail('schedule.not_found', 'name', jsonb_build_object('name', find_schedule.name));
    END IF;
    RETURN s;
END
$$;

-- alter_schedule(): change some fields of a schedule; NULL leaves a field as it is.
CREATE OR REPLACE FUNCTION agentlab_sched.alter_schedule(
    name text,
    cron text DEFAULT NULL,
    timezone text DEFAULT NULL,
    task text DEFAULT NULL,
    inputs jsonb DEFAULT NULL,
    enabled boolean DEFAULT NULL,
    overlap text DEFAULT NULL,
    misfire_grace interval DEFAULT NULL,
    timeout interval DEFAULT NULL,
    queue text DEFAULT NULL,
    priority integer DEFAULT NULL,
    catchup text DEFAULT NULL,
    max_catchup integer DEFAULT NULL,
    starts_at timestamptz DEFAULT NULL,
    ends_at timestamptz DEFAULT NULL,
    remaining_runs integer DEFAULT NULL,
    pause_after_failures integer DEFAULT NULL,
    context text DEFAULT NULL,
    dst_gap text DEFAULT NULL,
    dst_repeat text DEFAULT NULL,
    on_interrupt text DEFAULT NULL,
    new_name text DEFAULT NULL,
    expected_version integer DEFAULT NULL,
    clear text[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    clearable constant text[] := ARRAY(
        SELECT o.name FROM agentlab_sched.schedule_options o WHERE o.clearable ORDER BY o.position);
    -- The clearable arguments as given (a field cannot be both set and cleared).
    given jsonb := jsonb_build_object(
        'timeout', timeout, 'starts_at', starts_at, 'ends_at', ends_at,
        'remaining_runs', remaining_runs, 'pause_after_failures', pause_after_failures);
    c text;
    result integer;
    actual integer;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    FOREACH c IN ARRAY coalesce(clear, '{}'::text[]) LOOP
        IF c IS NULL OR NOT c = ANY (clearable) THEN
            PERFORM agentlab_sched.fail('schedule.clear_unknown', 'clear', jsonb_build_object(
                'value', coalesce(c, ''), 'allowed', to_jsonb(clearable)));
        END IF;
        IF jsonb_typeof(given -> c) <> 'null' THEN
            PERFORM agentlab_sched.fail('schedule.clear_conflict', c,
                                        jsonb_build_object('field', agentlab_sched.field_term(c)));
        END IF;
    END LOOP;
    IF new_name IS NOT NULL AND new_name IS DISTINCT FROM name
       AND EXISTS (SELECT FROM agentlab_sched.schedules s WHERE s.name = new_name) THEN
        PERFORM agentlab_sched.fail('schedule.name_taken', 'new_name',
                                    jsonb_build_object('name', new_name));
    END IF;

    -- The optimistic lock is this conditional UPDATE: of two sessions altering at once with the same
    -- expected_version, the second waits for the first's row lock, re-checks the condition against the
    -- committed row and matches nothing.
    UPDATE agentlab_sched.schedules AS s SET
        name = coalesce(new_name, s.name),
        cron = coalesce(cron, s.cron),
        timezone = coalesce(timezone, s.timezone),
        task = coalesce(task, s.task),
        inputs = coalesce(inputs, s.inputs),
        enabled = coalesce(enabled, s.enabled),
        overlap = coalesce(overlap, s.overlap),
        misfire_grace = coalesce(misfire_grace, s.misfire_grace),
        timeout = CASE WHEN 'timeout' = ANY (clear) THEN NULL ELSE coalesce(timeout, s.timeout) END,
        queue = coalesce(queue, s.queue),
        priority = coalesce(priority, s.priority),
        catchup = coalesce(catchup, s.catchup),
        max_catchup = coalesce(max_catchup, s.max_catchup),
        starts_at = CASE WHEN 'starts_at' = ANY (clear) THEN NULL ELSE coalesce(starts_at, s.starts_at) END,
        ends_at = CASE WHEN 'ends_at' = ANY (clear) THEN NULL ELSE coalesce(ends_at, s.ends_at) END,
        remaining_runs = CASE WHEN 'remaining_runs' = ANY (clear) THEN NULL
                              ELSE coalesce(remaining_runs, s.remaining_runs) END,
        pause_after_failures = CASE WHEN 'pause_after_failures' = ANY (clear) THEN NULL
                                    ELSE coalesce(pause_after_failures, s.pause_after_failures) END,
        context = coalesce(context, s.context),
        dst_gap = coalesce(dst_gap, s.dst_gap),
        dst_repeat = coalesce(dst_repeat, s.dst_repeat),
        on_interrupt = coalesce(on_interrupt, s.on_interrupt)
    WHERE s.name = name AND (expected_version IS NULL OR s.version = expected_version)
    RETURNING s.version INTO result;
    IF FOUND THEN
        RETURN result;
    END IF;
    actual := (agentlab_sched.find_schedule(name)).version;
    PERFORM agentlab_sched.fail('schedule.stale_version', 'expected_version', jsonb_build_object(
        'name', name, 'expected', expected_version, 'actual', actual));
    RETURN NULL;
END
$$;

-- schedule(): create the schedule of that name, or update it (as pg_cron's cron.schedule does).
-- name, cron, task, inputs and timezone are always set from the call; the other arguments, when NULL,
-- take the column default on create and leave the field as it is on update (a paused schedule stays
-- paused when a deploy script declares it again). With if_exists => 'error', an existing name is refused
-- (schedule.name_taken, SQLSTATE 23505) instead: create only.
CREATE OR REPLACE FUNCTION agentlab_sched.schedule(
    name text,
    cron text,
    task text,
    inputs jsonb DEFAULT '{}'::jsonb,
    timezone text DEFAULT 'UTC',
    queue text DEFAULT NULL,
    priority integer DEFAULT NULL,
    overlap text DEFAULT NULL,
    misfire_grace interval DEFAULT NULL,
    timeout interval DEFAULT NULL,
    enabled boolean DEFAULT NULL,
    catchup text DEFAULT NULL,
    max_catchup integer DEFAULT NULL,
    starts_at timestamptz DEFAULT NULL,
    ends_at timestamptz DEFAULT NULL,
    remaining_runs integer DEFAULT NULL,
    pause_after_failures integer DEFAULT NULL,
    context text DEFAULT NULL,
    dst_gap text DEFAULT NULL,
    dst_repeat text DEFAULT NULL,
    on_interrupt text DEFAULT NULL,
    if_exists text DEFAULT 'update')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sid bigint;
    d agentlab_sched.schedules;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    PERFORM agentlab_sched.validate_choice('if_exists', if_exists, ARRAY['update', 'error']);
    -- The arguments the call always sets must be given: NULL would mean "unchanged" in alter_schedule.
    -- (Their values are checked by the trigger, cron and time zone by check_cron / check_timezone.)
    IF cron IS NULL THEN
        PERFORM agentlab_sched.validate_text('cron', NULL, 0);
    END IF;
    PERFORM agentlab_sched.validate_text('task', task, 200, true, true);
    IF inputs IS NULL THEN
        PERFORM agentlab_sched.validate_text('inputs', NULL, 0);
    END IF;
    IF timezone IS NULL THEN
        PERFORM agentlab_sched.validate_text('timezone', NULL, 0);
    END IF;
    LOOP
        SELECT s.id INTO sid FROM agentlab_sched.schedules s WHERE s.name = name;
        IF FOUND AND if_exists = 'error' THEN
            PERFORM agentlab_sched.fail('schedule.name_taken', 'name', jsonb_build_object('name', name));
        END IF;
        IF FOUND THEN
            PERFORM agentlab_sched.alter_schedule(
                name, cron => cron, timezone => timezone, task => task, inputs => inputs,
                enabled => enabled, overlap => overlap, misfire_grace => misfire_grace, timeout => timeout,
                queue => queue, priority => priority, catchup => catchup, max_catchup => max_catchup,
                starts_at => starts_at, ends_at => ends_at, remaining_runs => remaining_runs,
                pause_after_failures => pause_after_failures, context => context, dst_gap => dst_gap,
                dst_repeat => dst_repeat, on_interrupt => on_interrupt);
            RETURN sid;
        END IF;
        -- The arguments left NULL take the option's default (schedule_options, from core/options.py).
        d := agentlab_sched.option_defaults();
        INSERT INTO agentlab_sched.schedules AS s
            (name, cron, task, inputs, timezone, queue, priority, overlap, misfire_grace, timeout, enabled,
             catchup, max_catchup, starts_at, ends_at, remaining_runs, pause_after_failures, context, dst_gap,
             dst_repeat, on_interrupt)
        VALUES (name, cron, task, inputs, timezone, coalesce(queue, d.queue), coalesce(priority, d.priority),
                coalesce(overlap, d.overlap), coalesce(misfire_grace, d.misfire_grace),
                coalesce(timeout, d.timeout), coalesce(enabled, d.enabled), coalesce(catchup, d.catchup),
                coalesce(max_catchup, d.max_catchup), coalesce(starts_at, d.starts_at),
                coalesce(ends_at, d.ends_at), coalesce(remaining_runs, d.remaining_runs),
                coalesce(pause_after_failures, d.pause_after_failures), coalesce(context, d.context),
                coalesce(dst_gap, d.dst_gap), coalesce(dst_repeat, d.dst_repeat),
                coalesce(on_interrupt, d.on_interrupt))
        ON CONFLICT ON CONSTRAINT schedules_name_key DO NOTHING
        RETURNING s.id INTO sid;
        IF sid IS NOT NULL THEN
            RETURN sid;
        END IF;
        -- Created by another session meanwhile: update it instead.
    END LOOP;
END
$$;

-- unschedule(): delete the schedule (its ledger goes with it; runs stay, unlinked). False when there
-- is no schedule of that name.
CREATE OR REPLACE FUNCTION agentlab_sched.unschedule(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    DELETE FROM agentlab_sched.schedules s WHERE s.name = name;
    RETURN FOUND;
END
$$;

-- pause(): stop firing (enabled = false) and say why. True when this call paused it, false when it
-- was paused already (a reason given then replaces the old one). The row lock here and in resume() is
-- NO KEY UPDATE, the lock the UPDATE takes anyway: it does not wait for transactions that only insert
-- fires, runs or requests of the schedule, such as a trigger() whose resolver is still answering.
CREATE OR REPLACE FUNCTION agentlab_sched.pause(name text, reason text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was_enabled boolean;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    was_enabled := (agentlab_sched.find_schedule(name, 'no key update')).enabled;
    UPDATE agentlab_sched.schedules s
    SET enabled = false,
        paused_reason = CASE WHEN was_enabled THEN reason ELSE coalesce(reason, s.paused_reason) END
    WHERE s.name = name;
    RETURN was_enabled;
END
$$;

-- resume(): fire again from now on: the next fire is the first due time after now (the paused time is
-- never replayed); clears paused_reason and consecutive_failures. True when this call resumed it.
CREATE OR REPLACE FUNCTION agentlab_sched.resume(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was_enabled boolean;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    was_enabled := (agentlab_sched.find_schedule(name, 'no key update')).enabled;
    IF was_enabled THEN
        RETURN false;
    END IF;
    UPDATE agentlab_sched.schedules s SET enabled = true WHERE s.name = name;
    RETURN true;
END
$$;

-- Record where schedule `name` was imported from (`source`, how a second import recognises it), and give it
-- the overlap policy of what it replaces (`overlap`, when given). Part of the SQL API of an import.
CREATE OR REPLACE FUNCTION agentlab_sched.mark_imported(name text, source text, overlap text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM agentlab_sched.find_schedule(name, 'no key update');
    UPDATE agentlab_sched.schedules s
    SET imported_from = source, overlap = coalesce(overlap, s.overlap)
    WHERE s.name = name;
END
$$;
