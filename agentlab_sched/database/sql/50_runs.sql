-- Runs follow their Procrastinate jobs: a trigger on procrastinate_jobs, so that status changes made by
-- workers, by the procrastinate CLI or by hand are all seen.

CREATE OR REPLACE FUNCTION agentlab_sched.follow_job() RETURNS trigger
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    next_status text;
BEGIN
    SELECT * INTO r FROM agentlab_sched.runs WHERE job_id = NEW.id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    next_status := CASE NEW.status::text
        WHEN 'todo' THEN 'queued'
        WHEN 'doing' THEN 'running'
        -- A task that ignored a timeout abort and returned anyway still timed out.
        WHEN 'succeeded' THEN CASE WHEN r.abort_reason = 'timeout' THEN 'timed_out' ELSE 'succeeded' END
        WHEN 'failed' THEN CASE WHEN r.abort_reason = 'timeout' THEN 'timed_out' ELSE 'failed' END
        WHEN 'cancelled' THEN 'cancelled'
        WHEN 'aborted' THEN CASE WHEN r.abort_reason = 'timeout' THEN 'timed_out' ELSE 'cancelled' END
        ELSE r.status END;
    -- A terminal run stays as it is (a timeout already recorded, an abandoned run); a run whose task asked
    -- for approval keeps waiting when its job ends.
    IF r.status IN ('succeeded', 'failed', 'cancelled', 'timed_out') AND next_status <> 'queued' THEN
        RETURN NULL;
    END IF;
    IF r.status = 'awaiting_approval' AND next_status IN ('succeeded', 'failed') THEN
        RETURN NULL;
    END IF;
    IF next_status = r.status THEN
        RETURN NULL;
    END IF;
    UPDATE agentlab_sched.runs SET
        status = next_status,
        started_at = CASE WHEN next_status = 'running' THEN coalesce(started_at, now()) ELSE started_at END,
        deadline_at = CASE WHEN next_status = 'running' AND timeout IS NOT NULL THEN now() + timeout
                           WHEN next_status IN ('succeeded', 'failed', 'cancelled', 'timed_out') THEN NULL
                           ELSE deadline_at END,
        finished_at = CASE WHEN next_status IN ('succeeded', 'failed', 'cancelled', 'timed_out') THEN now()
                           ELSE NULL END,
        error = CASE WHEN next_status = 'timed_out' THEN coalesce(error, agentlab_sched.msg(
                         'run.timed_out', jsonb_build_object('timeout', jsonb_build_object('duration', extract(epoch FROM timeout)))))
                     WHEN next_status IN ('queued', 'running', 'succeeded') THEN NULL
                     ELSE error END,
        updated_at = now()
    WHERE id = r.id;
    IF r.schedule_id IS NOT NULL THEN
        IF next_status = 'succeeded' THEN
            UPDATE agentlab_sched.schedules SET consecutive_failures = 0
            WHERE id = r.schedule_id AND consecutive_failures <> 0;
        ELSIF next_status IN ('failed', 'timed_out') THEN
            PERFORM agentlab_sched.count_failure(r.schedule_id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER agentlab_sched_follow_job
    AFTER UPDATE OF status ON public.procrastinate_jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION agentlab_sched.follow_job();
