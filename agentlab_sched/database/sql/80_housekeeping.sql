-- Housekeeping: what a periodic task does every few seconds (agentlab_sched/housekeeping.py).
--
-- - finished jobs of the scheduler's own periodic tasks (one a second) are deleted;
-- - runs whose worker stopped heartbeating for `stalled_after` become suspended (detect_suspended);
-- - runs past their deadline are aborted, and a task that ignores the abort is reported (enforce_timeouts);
-- - runs' ends that could not be counted against their schedule when their job finished (the schedules
--   table or row was locked) are counted (apply_pending_tallies);
-- - with a `retention`, history older than that is pruned, at most `prune_batch` runs a call (prune).
-- Every part skips rows another worker is handling; any number of workers can run it at once.

CREATE OR REPLACE FUNCTION agentlab_sched.housekeeping(now timestamptz DEFAULT now(),
                                                       stalled_after interval DEFAULT agentlab_sched.policy_interval('stall_seconds'),
                                                       retention interval DEFAULT NULL,
                                                       abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'),
                                                       prune_batch integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pruned integer;
    done jsonb;
BEGIN
    -- The scheduler's own periodic jobs are worth nothing once finished.
    DELETE FROM public.procrastinate_jobs j
    WHERE j.task_name IN ('agentlab_sched:tick', 'agentlab_sched:housekeeping')
      AND j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
      AND j.id < (SELECT max(id) - 100 FROM public.procrastinate_jobs);
    GET DIAGNOSTICS pruned = ROW_COUNT;
    done := jsonb_build_object(
        'pruned_ticks', pruned,
        'suspended', agentlab_sched.detect_suspended(now, stalled_after),
        'timeouts', agentlab_sched.enforce_timeouts(now, abort_grace),
        'tallied', agentlab_sched.apply_pending_tallies());
    IF retention IS NOT NULL THEN
        done := done || jsonb_build_object('pruned', agentlab_sched.prune(retention, now, prune_batch));
    END IF;
    RETURN done;
END
$$;
