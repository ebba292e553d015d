-- Counting a run's end against its schedule (consecutive_failures, pause_after_failures): at once when
-- the job finishes and the schedule's row is free, else by housekeeping, in order (docs/runs.md). The job
-- triggers of 50_runs.sql call tally_run() from settle_run().

-- Count a run's end (`ended`) against its schedule: 'success' resets consecutive_failures, 'failure' adds
-- one and may pause the schedule (count_failure). A run counts once however many of its attempts fail,
-- until the count is reset (its counted_epoch is the schedule's failure_epoch when it counted). The caller
-- holds the schedule's row (or waits for it under its lock_timeout). The run is named by its id and
-- created_at, which finds it in one partition of the runs table (by id alone, every partition's index is
-- probed, and planned).
CREATE OR REPLACE FUNCTION agentlab_sched.count_tally(run_id uuid, created timestamptz, sid bigint, ended text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s agentlab_sched.schedules;
    counted integer;
BEGIN
    SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.id = sid FOR UPDATE;
    IF FOUND THEN
        IF ended = 'success' THEN
            IF s.consecutive_failures <> 0 THEN
                UPDATE agentlab_sched.schedules x SET consecutive_failures = 0 WHERE x.id = sid;
            END IF;
        ELSE
            SELECT x.counted_epoch INTO counted FROM agentlab_sched.runs x WHERE x.id = run_id AND x.created_at = created;
            IF counted IS DISTINCT FROM s.failure_epoch THEN
                PERFORM agentlab_sched.count_failure(sid);
                UPDATE agentlab_sched.runs x SET counted_epoch = s.failure_epoch
                WHERE x.id = run_id AND x.created_at = created;
            END IF;
        END IF;
    END IF;
END
$$;

-- The same, and the run's pending count cleared (housekeeping's, apply_pending_tallies).
CREATE OR REPLACE FUNCTION agentlab_sched.apply_tally(run_id uuid, sid bigint, ended text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    created timestamptz;
BEGIN
    SELECT x.created_at INTO created FROM agentlab_sched.runs x WHERE x.id = run_id;
    PERFORM agentlab_sched.count_tally(run_id, created, sid, ended);
    UPDATE agentlab_sched.runs x SET tally_pending = NULL
    WHERE x.id = run_id AND x.created_at = created AND x.tally_pending IS NOT NULL;
END
$$;

-- The same, from a job being finished: without waiting on the schedules table (a migration's LOCK TABLE,
-- a transaction holding the row, a tick claiming it). When the row is not free within a moment, or an
-- earlier count of this schedule is still pending, the count is left to housekeeping, in order: returns
-- what the caller records in runs.tally_pending (NULL when counted now), in the update of the run it makes
-- after this call.
DROP FUNCTION IF EXISTS agentlab_sched.tally_run(uuid, bigint, text);
CREATE OR REPLACE FUNCTION agentlab_sched.tally_run(r agentlab_sched.runs, ended text) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    saved text := pg_catalog.current_setting('lock_timeout');
BEGIN
    IF r.schedule_id IS NULL OR ended IS NULL THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM agentlab_sched.runs x WHERE x.schedule_id = r.schedule_id AND x.tally_pending IS NOT NULL) THEN
        RETURN ended;
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
    BEGIN
        PERFORM agentlab_sched.count_tally(r.id, r.created_at, r.schedule_id, ended);
    EXCEPTION WHEN lock_not_available THEN
        PERFORM pg_catalog.set_config('lock_timeout', saved, true);
        RETURN ended;  -- left to housekeeping
    END;
    PERFORM pg_catalog.set_config('lock_timeout', saved, true);
    RETURN NULL;
END
$$;

-- Housekeeping: the counts tally_run could not make, oldest first, schedule by schedule (a schedule
-- whose row is still taken waits for the next round). Returns how many were counted.
CREATE OR REPLACE FUNCTION agentlab_sched.apply_pending_tallies() RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sid bigint;
    r record;
    n integer := 0;
BEGIN
    FOR sid IN SELECT DISTINCT x.schedule_id FROM agentlab_sched.runs x WHERE x.tally_pending IS NOT NULL LOOP
        PERFORM 1 FROM agentlab_sched.schedules s WHERE s.id = sid FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND AND EXISTS (SELECT 1 FROM agentlab_sched.schedules s WHERE s.id = sid);
        FOR r IN SELECT x.id, x.tally_pending FROM agentlab_sched.runs x
                 WHERE x.schedule_id = sid AND x.tally_pending IS NOT NULL
                 ORDER BY x.finished_at, x.id FOR UPDATE SKIP LOCKED LOOP
            PERFORM agentlab_sched.apply_tally(r.id, sid, r.tally_pending);
            n := n + 1;
        END LOOP;
    END LOOP;
    RETURN n;
END
$$;

-- consecutive_failures back to 0 (a success, a resume): a new epoch, so a run that failed before counts
-- again if it fails again after. (Fires after schedules_before_write, which may itself reset the count.)
CREATE OR REPLACE FUNCTION agentlab_sched.schedules_failure_epoch() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.failure_epoch := OLD.failure_epoch + 1;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER schedules_failure_epoch
    BEFORE UPDATE ON agentlab_sched.schedules
    FOR EACH ROW WHEN (NEW.consecutive_failures = 0 AND OLD.consecutive_failures <> 0)
    EXECUTE FUNCTION agentlab_sched.schedules_failure_epoch();
