-- Notifications (docs/notifications.md): the outbox, written with the run status change that causes it.
-- (Plaintext webhook URLs and secrets written through SQL are refused by schedules_before_write in
-- 27_schedule_write.sql, with a message saying why.)

-- The notification event a run status causes, or NULL: finished (succeeded); failed (a troubled run:
-- failed, timed_out, and suspended: a suspended run will not continue by itself); awaiting_approval.
CREATE OR REPLACE FUNCTION agentlab_sched.notify_event(status text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN status = 'succeeded' THEN 'finished'
        WHEN agentlab_sched.run_is_troubled(status) THEN 'failed'
        WHEN status = 'awaiting_approval' THEN 'awaiting_approval'
    END
$$;

-- AFTER INSERT OR UPDATE OF status, segment ON runs: one outbox row per (run, event, segment), in the
-- same transaction as the status change, when the run's schedule has a webhook subscribed to the event.
-- finished and failed are written once per run (a run suspended and then abandoned is one failure, a
-- status set twice is one row); awaiting_approval once per segment (the outbox_once key). Concurrent
-- updates of one run are serialised by its row lock, and each statement here sees the ones before.
CREATE OR REPLACE FUNCTION agentlab_sched.runs_outbox() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ev text := agentlab_sched.notify_event(NEW.status);
    written integer;
    subscribed boolean;
    saved text := current_setting('lock_timeout');
BEGIN
    IF ev IS NULL OR NEW.schedule_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status AND OLD.segment = NEW.segment THEN
        RETURN NULL;
    END IF;
    -- One end per run: a terminal run set to another terminal status (a timed-out run whose task still
    -- returned) is not reported again.
    IF TG_OP = 'UPDATE' AND agentlab_sched.run_is_final(OLD.status)
       AND agentlab_sched.run_is_final(NEW.status) THEN
        RETURN NULL;
    END IF;
    -- Without waiting on the schedules table (a job is being finished: a migration's LOCK TABLE must not
    -- hold it up): when it cannot be read at once, the row is written anyway and the dispatcher, which
    -- checks the subscription again when it sends, drops it if the schedule is not subscribed.
    PERFORM set_config('lock_timeout', '50ms', true);
    BEGIN
        subscribed := EXISTS (SELECT 1 FROM agentlab_sched.schedules s
                              WHERE s.id = NEW.schedule_id AND s.webhook_url_enc IS NOT NULL
                                AND ev = ANY (s.webhook_events));
    EXCEPTION WHEN lock_not_available THEN
        subscribed := true;
    END;
    PERFORM set_config('lock_timeout', saved, true);
    IF NOT subscribed THEN
        RETURN NULL;
    END IF;
    IF ev <> 'awaiting_approval' AND EXISTS (
            SELECT 1 FROM agentlab_sched.outbox o WHERE o.run_id = NEW.id AND o.event = ev) THEN
        RETURN NULL;
    END IF;
    INSERT INTO agentlab_sched.outbox (run_id, run_created_at, schedule_id, event, segment, payload)
    VALUES (NEW.id, NEW.created_at, NEW.schedule_id, ev, NEW.segment,
            jsonb_build_object('status', NEW.status, 'error', NEW.error, 'error_code', NEW.error_code, 'error_term', NEW.error_term,
                               'started_at', NEW.started_at, 'finished_at', NEW.finished_at))
    ON CONFLICT ON CONSTRAINT outbox_once DO NOTHING;
    GET DIAGNOSTICS written = ROW_COUNT;
    IF written > 0 THEN
        PERFORM pg_notify('agentlab_sched_outbox', NEW.schedule_id::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER runs_outbox
    AFTER INSERT OR UPDATE OF status, segment ON agentlab_sched.runs
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.runs_outbox();

-- Set the webhook of schedule `name` (Python encrypts URL and secret with a key the database never
-- holds, bound to the schedule; the validation trigger checks the rest). `expected_version` is the version
-- the caller read: a schedule changed meanwhile is refused (SQLSTATE 40001). Returns the new version.
CREATE OR REPLACE FUNCTION agentlab_sched.set_webhook(name text, expected_version integer, format text,
                                                      url_enc text, secret_enc text, url_hint text,
                                                      events text[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    result integer;
    actual integer;
BEGIN
    UPDATE agentlab_sched.schedules s
    SET webhook_format = format, webhook_url_enc = url_enc, webhook_secret_enc = secret_enc,
        webhook_url_hint = url_hint, webhook_events = events
    WHERE s.name = name AND s.version = expected_version
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

-- Replace a schedule's webhook ciphertext by the same values re-encrypted with the newest key
-- (rotate-secrets): bookkeeping, so no version bump, and one audit row 'rotate'. Refused (40001) when the
-- ciphertext is no longer `old_url_enc` / `old_secret_enc`.
CREATE OR REPLACE FUNCTION agentlab_sched.rotate_webhook(schedule_id bigint, old_url_enc text, new_url_enc text,
                                                         old_secret_enc text, new_secret_enc text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_name text;
BEGIN
    INSERT INTO agentlab_sched.bookkeeping_marks (schedule_id, kind) VALUES (rotate_webhook.schedule_id, 'rotate')
    ON CONFLICT DO NOTHING;
    UPDATE agentlab_sched.schedules s
    SET webhook_url_enc = new_url_enc, webhook_secret_enc = new_secret_enc
    WHERE s.id = rotate_webhook.schedule_id
      AND s.webhook_url_enc IS NOT DISTINCT FROM old_url_enc AND s.webhook_secret_enc IS NOT DISTINCT FROM old_secret_enc
      AND (new_url_enc IS NULL) = (old_url_enc IS NULL) AND (new_secret_enc IS NULL) = (old_secret_enc IS NULL)
    RETURNING s.name INTO found_name;
    DELETE FROM agentlab_sched.bookkeeping_marks m
    WHERE m.xact = pg_current_xact_id() AND m.schedule_id = rotate_webhook.schedule_id AND m.kind = 'rotate';
    IF found_name IS NULL THEN
        PERFORM agentlab_sched.fail('notify.rotate.changed', 'webhook_url', jsonb_build_object(
            'schedule', coalesce((SELECT s.name FROM agentlab_sched.schedules s WHERE s.id = rotate_webhook.schedule_id),
                                 rotate_webhook.schedule_id::text)));
    END IF;
    INSERT INTO agentlab_sched.schedule_changes (schedule_id, schedule_name, operation, db_role, application_name)
    VALUES (rotate_webhook.schedule_id, found_name, 'rotate', session_user,
            nullif(current_setting('application_name', true), ''));
END
$$;

-- AFTER DELETE ON schedules: its notifications go with it (what a foreign key with ON DELETE CASCADE did;
-- the outbox has none, so that writing to it never waits on the schedules table).
CREATE OR REPLACE FUNCTION agentlab_sched.schedules_outbox_gone() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM agentlab_sched.outbox o WHERE o.schedule_id = OLD.id;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION agentlab_sched.schedules_outbox_gone() FROM PUBLIC;

CREATE OR REPLACE TRIGGER schedules_outbox_gone
    AFTER DELETE ON agentlab_sched.schedules
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.schedules_outbox_gone();
