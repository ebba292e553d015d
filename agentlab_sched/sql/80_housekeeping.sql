-- Housekeeping: what a periodic task does every few seconds.

CREATE OR REPLACE FUNCTION agentlab_sched.housekeeping() RETURNS jsonb
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $$
DECLARE
    pruned integer;
BEGIN
    -- The scheduler's own periodic jobs (one a second) are worth nothing once finished.
    DELETE FROM procrastinate_jobs j
    WHERE j.task_name IN ('agentlab_sched:tick', 'agentlab_sched:housekeeping')
      AND j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
      AND j.id < (SELECT max(id) - 100 FROM procrastinate_jobs);
    GET DIAGNOSTICS pruned = ROW_COUNT;
    RETURN jsonb_build_object('pruned_ticks', pruned);
END
$$;
