-- Notifications (docs/notifications.md): the outbox, written with the run status change that causes it.
-- (Plaintext webhook URLs and secrets written through SQL are refused by schedules_before_write in
-- 30_schedules.sql, with a message saying why.)

-- The notification event a run status causes, or NULL: finished (succeeded); failed (failed, timed_out,
-- and suspended: a suspended run will not continue by itself); awaiting_approval.
CREATE OR REPLACE FUNCTION agentlab_sched.notify_event(status text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE status
        WHEN 'succeeded' THEN 'finished'
        WHEN 'failed' THEN 'failed'
        WHEN 'timed_out' THEN 'failed'
        WHEN 'suspended' THEN 'failed'
        WHEN 'awaiting_approval' THEN 'awaiting_approval'
    END
$$;

-- AFTER INSERT OR UPDATE OF status, segment ON runs: one outbox row per (run, event, segment), in the
-- same transaction as the status change, when the run's schedule has a webhook subscribed to the event.
-- finished and failed are written once per run (a run suspended and then abandoned is one failure, a
-- status set twice is one row); awaiting_approval once per segment (the outbox_once key). Concurrent
-- updates of one run are serialised by its row lock, and each statement here sees the ones before.
CREATE OR REPLACE FUNCTION agentlab_sched.runs_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ev text := agentlab_sched.notify_event(NEW.status);
    written integer;
BEGIN
    IF ev IS NULL OR NEW.schedule_id IS NULL THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status AND OLD.segment = NEW.segment THEN
        RETURN NULL;
    END IF;
    -- One end per run: a terminal run set to another terminal status (a timed-out run whose task still
    -- returned) is not reported again.
    IF TG_OP = 'UPDATE' AND OLD.status IN ('succeeded', 'failed', 'cancelled', 'timed_out')
       AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'timed_out') THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM agentlab_sched.schedules s
                   WHERE s.id = NEW.schedule_id AND s.webhook_url_enc IS NOT NULL
                     AND ev = ANY (s.webhook_events)) THEN
        RETURN NULL;
    END IF;
    IF ev <> 'awaiting_approval' AND EXISTS (
            SELECT 1 FROM agentlab_sched.outbox o WHERE o.run_id = NEW.id AND o.event = ev) THEN
        RETURN NULL;
    END IF;
    INSERT INTO agentlab_sched.outbox (run_id, schedule_id, event, segment, payload)
    VALUES (NEW.id, NEW.schedule_id, ev, NEW.segment,
            jsonb_build_object('status', NEW.status, 'error', NEW.error, 'error_code', NEW.error_code,
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
