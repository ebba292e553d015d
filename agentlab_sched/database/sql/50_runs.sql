-- Runs follow their Procrastinate jobs: triggers on procrastinate_jobs, so that status changes and
-- deletions made by workers, by the procrastinate CLI or by hand are all seen (docs/runs.md, "What a
-- run follows").
--
-- - The triggers name no column (no UPDATE OF, no WHEN): PostgreSQL refuses `ALTER COLUMN ... TYPE` on a
--   column a trigger definition names, and Procrastinate's own migrations alter procrastinate_jobs.
-- - They are SECURITY DEFINER: a role with rights on Procrastinate's tables and none on schema
--   agentlab_sched (the worker of another app sharing the database) still updates and deletes its jobs.
-- - Finishing a job never waits on the schedules table: counting a run's end against its schedule takes
--   the schedule's row only if it is free at once, else housekeeping counts it (tally_run, 54_run_tally.sql).

-- Whether an abort asked for by someone (runs cancel, a newer fire of a cancel_other schedule, abandon,
-- reject, or Procrastinate's own cancel with abort) is what ended a job: the run is cancelled, never a
-- failure. A timeout is not one of them (the run times out); a worker stopping is not either (nobody
-- asked: the run is interrupted).
CREATE OR REPLACE FUNCTION agentlab_sched.cancel_asked(r agentlab_sched.runs, abort_requested boolean)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(r.abort_reason, '') <> 'timeout'
           AND (r.abort_reason IN ('cancel', 'overlap.cancelled_by_newer', 'abandoned', 'rejected')
                OR coalesce(abort_requested, false))
$$;

-- The schedule's on_interrupt, read without waiting on the schedules table (a job may be being finished):
-- 'suspend' when the row cannot be read at once, and for a run without a schedule.
CREATE OR REPLACE FUNCTION agentlab_sched.interrupt_policy(sid bigint) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    saved text := pg_catalog.current_setting('lock_timeout');
    policy text;
BEGIN
    IF sid IS NULL THEN
        RETURN 'suspend';
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
    BEGIN
        SELECT s.on_interrupt INTO policy FROM agentlab_sched.schedules s WHERE s.id = sid;
    EXCEPTION WHEN lock_not_available THEN
        policy := NULL;
    END;
    PERFORM pg_catalog.set_config('lock_timeout', saved, true);
    RETURN coalesce(policy, 'suspend');
END
$$;

-- What an interrupted run becomes under on_interrupt `policy` after `interrupts` earlier interruptions:
-- queued (retry, under the limit), cancelled (abandon) or suspended. interrupt_run() acts on it; a stopping
-- worker says it (shutdown_outcome()).
CREATE OR REPLACE FUNCTION agentlab_sched.interrupt_outcome(policy text, interrupts integer) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN policy = 'retry' AND interrupts < agentlab_sched.size_limit('interrupt_retries') THEN 'queued'
                WHEN policy = 'abandon' THEN 'cancelled'
                ELSE 'suspended' END
$$;

-- A run nobody asked to stop was interrupted: a stopping worker aborted its job (`job_live` false: the job
-- has ended), or its worker died or lost the database (its job is still doing on a worker that is gone,
-- `job_live` true). What follows is its schedule's on_interrupt (docs/runs.md):
-- - suspend: the run is suspended, reported once; it blocks a skip schedule until resumed or abandoned;
-- - retry: it runs again on another worker (its stalled job retried, or a new job when it ended), at most
--   limit interrupt_retries times (limits.py); after that it is suspended, saying so;
-- - abandon: it ends cancelled, saying why, its stalled job ended; the next fire goes ahead.
-- The caller holds the run's row (and its job's). Returns the run's new status.
CREATE OR REPLACE FUNCTION agentlab_sched.interrupt_run(r agentlab_sched.runs, job_live boolean,
                                                      at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    policy text := agentlab_sched.interrupt_policy(r.schedule_id);
    most integer := agentlab_sched.size_limit('interrupt_retries');
    outcome text := agentlab_sched.interrupt_outcome(policy, r.interrupts);
    jid bigint;
BEGIN
    IF outcome = 'queued' THEN
        IF job_live AND r.job_id IS NOT NULL THEN
            -- doing -> todo (its place, lock and priority kept): the job trigger queues the run.
            PERFORM public.procrastinate_retry_job_v2(r.job_id, NULL, NULL, NULL, NULL);
            jid := r.job_id;
        ELSE
            jid := agentlab_sched.defer_run_job(r);
        END IF;
        UPDATE agentlab_sched.runs x
        SET status = 'queued', job_id = jid, interrupts = x.interrupts + 1, deadline_at = NULL, finished_at = NULL,
            abort_reason = NULL, abort_requested_at = NULL, outcome = NULL,
            error = agentlab_sched.msg('run.interrupted_retried', jsonb_build_object('attempt', x.interrupts + 1, 'most', most)),
            error_code = 'run.interrupted_retried', error_term = agentlab_sched.term('run.interrupted_retried', jsonb_build_object('attempt', x.interrupts + 1, 'most', most)),
            updated_at = at
        WHERE x.id = r.id AND x.created_at = r.created_at;
        RETURN 'queued';
    ELSIF outcome = 'cancelled' THEN
        UPDATE agentlab_sched.runs x
        SET status = 'cancelled', finished_at = at, deadline_at = NULL, abort_reason = 'interrupted',
            abort_requested_at = NULL, error = agentlab_sched.msg('run.interrupted_abandoned'),
            error_code = 'run.interrupted_abandoned', error_term = agentlab_sched.term('run.interrupted_abandoned'), updated_at = at
        WHERE x.id = r.id AND x.created_at = r.created_at;
        IF job_live AND r.job_id IS NOT NULL THEN
            PERFORM public.procrastinate_finish_job_v1(r.job_id, 'aborted', false);  -- its lock released
        END IF;
        RETURN 'cancelled';
    END IF;
    UPDATE agentlab_sched.runs x
    SET status = 'suspended', suspended_at = at, deadline_at = NULL, finished_at = NULL, abort_reason = NULL,
        abort_requested_at = NULL, outcome = NULL,
        error = CASE WHEN policy = 'retry'
                     THEN agentlab_sched.msg('run.suspended_after_retries', jsonb_build_object('count', r.interrupts))
                     ELSE agentlab_sched.msg('run.suspended') END,
        error_code = CASE WHEN policy = 'retry' THEN 'run.suspended_after_retries' ELSE 'run.suspended' END,
        error_term = CASE WHEN policy = 'retry' THEN agentlab_sched.term('run.suspended_after_retries', jsonb_build_object('count', r.interrupts)) ELSE agentlab_sched.term('run.suspended') END, updated_at = at
    WHERE x.id = r.id AND x.created_at = r.created_at;
    RETURN 'suspended';
END
$$;

-- What a run becomes when its job `ended` so (a job status, or 'removed_waiting' / 'removed_running' when
-- the job row was deleted while todo / doing), and writes it. `abort_requested`: the job's flag before the
-- change (a cancel asked through Procrastinate). Returns the run's new status, or NULL when it stays.
-- `r` is the run's row as the caller holds it (locked): its result and outcome are written from it, so
-- that a caller finishing the job writes the body's result in this same update (finish_jobs).
CREATE OR REPLACE FUNCTION agentlab_sched.settle_run(r agentlab_sched.runs, ended text, abort_requested boolean)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- One plan per statement for the session: the update finds the run by its key (id and created_at, one
-- partition, chosen when it runs), where a plan made for each call, pruned to that partition, was planned
-- twice per job in a storm (a quarter of a millisecond each). No sequential scan in a plan that is kept.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    next_status text;
    code text;
    params jsonb := '{}'::jsonb;
    pending text;
BEGIN
    IF ended = 'removed_running' THEN
        -- Deleted instead of finished (procrastinate worker --delete-jobs): what the middleware saw the
        -- body do just before; nothing known (a DELETE by hand, a worker without the middleware):
        -- cancelled, saying so.
        ended := coalesce(r.outcome, 'removed_running');
    END IF;

    IF agentlab_sched.run_is_final(r.status) THEN
        -- Ended: only a Procrastinate retry of its job (procrastinate retry) brings it back.
        next_status := CASE WHEN ended = 'todo' THEN 'queued' END;
    ELSIF r.status = 'awaiting_approval' THEN
        -- The job of the segment that asked ends (or is deleted) as it likes; the approved segment's job
        -- starting, or gone before it started, is what moves the run.
        next_status := CASE ended WHEN 'doing' THEN 'running'
                                  WHEN 'removed_waiting' THEN 'cancelled'
                                  WHEN 'cancelled' THEN 'cancelled' END;
    ELSIF r.status = 'suspended' THEN
        -- Resumed (its stalled job retried), or the job it was suspended for finished after all.
        next_status := CASE ended WHEN 'todo' THEN 'queued' WHEN 'doing' THEN 'running'
                                  WHEN 'succeeded' THEN 'succeeded' WHEN 'failed' THEN 'failed' END;
    ELSE
        next_status := CASE ended
            WHEN 'todo' THEN 'queued'
            WHEN 'doing' THEN 'running'
            -- A task that ignored a timeout abort and returned anyway still timed out; one that returned
            -- after a cancel was asked is cancelled, whether or not its worker had heard of the abort yet
            -- (a sync task returning just after it: the database, not the worker's flag, decides).
            WHEN 'succeeded' THEN CASE WHEN r.abort_reason = 'timeout' THEN 'timed_out'
                                       WHEN agentlab_sched.cancel_asked(r, abort_requested) THEN 'cancelled'
                                       ELSE 'succeeded' END
            WHEN 'failed' THEN CASE WHEN r.abort_reason = 'timeout' THEN 'timed_out'
                                    WHEN agentlab_sched.cancel_asked(r, abort_requested) THEN 'cancelled'
                                    ELSE 'failed' END
            WHEN 'aborted' THEN CASE WHEN r.abort_reason = 'timeout' THEN 'timed_out'
                                     WHEN agentlab_sched.cancel_asked(r, abort_requested) THEN 'cancelled'
                                     ELSE 'interrupted' END
            WHEN 'cancelled' THEN 'cancelled'
            WHEN 'removed_waiting' THEN 'cancelled'
            WHEN 'removed_running' THEN 'cancelled' END;
    END IF;
    IF next_status IS NULL OR next_status = r.status THEN
        RETURN NULL;
    END IF;

    -- Why, when nobody said so already.
    IF next_status = 'cancelled' AND ended IN ('removed_waiting', 'removed_running') THEN
        code := CASE ended WHEN 'removed_waiting' THEN 'run.job_removed' ELSE 'run.job_removed_running' END;
    ELSIF next_status = 'cancelled' AND r.abort_reason IS NULL THEN
        code := 'run.job_cancelled';
    ELSIF next_status = 'failed' AND r.error IS NULL THEN
        code := 'run.failed_without_error';
        params := jsonb_build_object('task', r.task);
    END IF;

    IF next_status = 'interrupted' THEN
        -- Nobody asked it to stop (a stopping worker aborted it): what its schedule's on_interrupt says.
        RETURN agentlab_sched.interrupt_run(r, false);
    END IF;

    pending := agentlab_sched.tally_run(r, CASE WHEN next_status = 'succeeded' THEN 'success'
                                                WHEN agentlab_sched.run_is_failure(next_status) THEN 'failure' END);
    UPDATE agentlab_sched.runs x SET
        status = next_status,
        tally_pending = pending,
        started_at = CASE WHEN next_status = 'running' THEN coalesce(x.started_at, now()) ELSE x.started_at END,
        deadline_at = CASE WHEN next_status = 'running' AND x.timeout IS NOT NULL THEN now() + x.timeout
                           WHEN agentlab_sched.run_is_final(next_status) THEN NULL
                           ELSE x.deadline_at END,
        finished_at = CASE WHEN agentlab_sched.run_is_final(next_status) THEN now()
                           ELSE NULL END,
        error = CASE WHEN code IS NOT NULL THEN agentlab_sched.msg(code, params)
                     WHEN next_status = 'timed_out' THEN coalesce(x.error, agentlab_sched.msg('run.timed_out', agentlab_sched.run_timeout_params(x.timeout)))
                     WHEN agentlab_sched.run_is_error_free(next_status) THEN NULL
                     ELSE x.error END,
        error_code = CASE WHEN code IS NOT NULL THEN code
                          WHEN next_status = 'timed_out' THEN coalesce(x.error_code, 'run.timed_out')
                          WHEN agentlab_sched.run_is_error_free(next_status) THEN NULL
                          ELSE x.error_code END,
        error_term = CASE WHEN code IS NOT NULL THEN agentlab_sched.term(code, params) WHEN next_status = 'timed_out' AND x.error IS NULL THEN agentlab_sched.term('run.timed_out', agentlab_sched.run_timeout_params(x.timeout))
                          WHEN agentlab_sched.run_is_error_free(next_status) THEN NULL ELSE x.error_term END,
        outcome = CASE WHEN agentlab_sched.run_is_active(next_status) THEN NULL ELSE r.outcome END,
        -- The result of a body that returned after it was cancelled is discarded.
        result = CASE WHEN next_status = 'cancelled' THEN NULL ELSE r.result END,
        updated_at = now()
    WHERE x.id = r.id AND x.created_at = r.created_at;
    RETURN next_status;
END
$$;

-- The queued runs of the jobs `jobs`, started in one statement: settle_run's change from queued to running
-- (its job taken), for many runs at once. The caller holds the jobs' rows (the job trigger's lock order:
-- the job, then its run) and marks them doing next; the job trigger then finds these runs running and
-- leaves them. Runs in any other status (awaiting an approval, suspended, ended) are left to the trigger.
-- tests/worker/test_batch_jobs.py holds the runs it writes to those settle_run writes.
CREATE OR REPLACE FUNCTION agentlab_sched.start_runs(jobs bigint[]) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
-- Key lookups whatever the statistics say, with one plan for the session (as run_contexts in
-- 52_run_worker.sql): a plan made while the day's runs were few read every open run for each call once
-- thousands were queued, and a join of the runs with their keys read every run of the day.
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    ids uuid[];
    created timestamptz[];
BEGIN
    -- Each job's run by the job index (OFFSET 0: a look-up of its own, as run_contexts does).
    SELECT array_agg(r.id), array_agg(r.created_at) INTO ids, created
    FROM unnest(jobs) AS j(id)
    CROSS JOIN LATERAL (SELECT y.id, y.created_at, y.status FROM agentlab_sched.runs y WHERE y.job_id = j.id
                        OFFSET 0) r
    WHERE r.status = 'queued';
    IF ids IS NULL THEN
        RETURN;
    END IF;
    -- Then the runs by their keys (each id has one created_at: the pairs match these runs and no other).
    -- Their jobs are held by the caller, and whoever changes a run holds its job first: still queued.
    UPDATE agentlab_sched.runs x SET
        status = 'running',
        tally_pending = NULL,
        started_at = coalesce(x.started_at, now()),
        deadline_at = CASE WHEN x.timeout IS NOT NULL THEN now() + x.timeout ELSE x.deadline_at END,
        finished_at = NULL,
        error = NULL,
        error_code = NULL,
        error_term = NULL,
        outcome = NULL,
        updated_at = now()
    WHERE x.id = ANY (ids) AND x.created_at = ANY (created);
END
$$;
REVOKE ALL ON FUNCTION agentlab_sched.start_runs(bigint[]) FROM PUBLIC;

-- AFTER UPDATE ON procrastinate_jobs: the run of the job follows a change of its status.
--
-- The two job triggers, and what they call, keep their statements' plans (plan_cache_mode = auto, where
-- our connections force a new plan at every execution): each is a lookup by key, planned the same
-- whatever the key, and planning one over the partitioned runs table reads every partition's indexes
-- (about 80 buffers a statement, several statements per job change, in a storm). Sequential scans are
-- off so that a plan kept from when the runs were few never reads a whole partition later.
CREATE OR REPLACE FUNCTION agentlab_sched.follow_job() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = auto
SET enable_seqscan = off
AS $$
DECLARE
    r agentlab_sched.runs;
BEGIN
    IF OLD.status IS NOT DISTINCT FROM NEW.status THEN
        RETURN NULL;
    END IF;
    SELECT * INTO r FROM agentlab_sched.runs x WHERE x.job_id = NEW.id FOR UPDATE;
    IF FOUND THEN
        PERFORM agentlab_sched.settle_run(r, NEW.status::text, OLD.abort_requested);
    END IF;
    RETURN NULL;
END
$$;

-- BEFORE DELETE ON procrastinate_jobs: a job deleted while waiting cancels its run (saying its job was
-- removed); one deleted while running (instead of finished: --delete-jobs) ends its run as the body
-- ended. A finished job deleted later (retention, remove_old_jobs) changes nothing but the link. Before
-- the delete, while the job's row is still there (an interrupted run deferred again takes its queue,
-- priority and lock). Then the runs that named the job name none (runs.job_id has no foreign key: this
-- is its ON DELETE SET NULL, the run's updated_at left as it was).
CREATE OR REPLACE FUNCTION agentlab_sched.follow_deleted_job() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = auto
SET enable_seqscan = off
AS $$
DECLARE
    r agentlab_sched.runs;
BEGIN
    IF OLD.status::text IN ('todo', 'doing') THEN
        SELECT * INTO r FROM agentlab_sched.runs x WHERE x.job_id = OLD.id FOR UPDATE;
        IF FOUND THEN
            PERFORM agentlab_sched.settle_run(r, CASE WHEN OLD.status::text = 'todo' THEN 'removed_waiting'
                                                      ELSE 'removed_running' END, OLD.abort_requested);
        END IF;
    END IF;
    UPDATE agentlab_sched.runs x SET job_id = NULL WHERE x.job_id = OLD.id;
    RETURN OLD;
END
$$;

REVOKE ALL ON FUNCTION agentlab_sched.follow_job() FROM PUBLIC;
REVOKE ALL ON FUNCTION agentlab_sched.follow_deleted_job() FROM PUBLIC;

CREATE OR REPLACE TRIGGER agentlab_sched_follow_job
    AFTER UPDATE ON public.procrastinate_jobs
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.follow_job();

CREATE OR REPLACE TRIGGER agentlab_sched_follow_deleted_job
    BEFORE DELETE ON public.procrastinate_jobs
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.follow_deleted_job();

-- AFTER DELETE ON schedules: its runs stay, unlinked (what the foreign key's ON DELETE SET NULL did; runs
-- have none, so that finishing a job never waits on the schedules table).
CREATE OR REPLACE FUNCTION agentlab_sched.schedules_runs_unlinked() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE agentlab_sched.runs r SET schedule_id = NULL WHERE r.schedule_id = OLD.id;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION agentlab_sched.schedules_runs_unlinked() FROM PUBLIC;

CREATE OR REPLACE TRIGGER schedules_runs_unlinked
    AFTER DELETE ON agentlab_sched.schedules
    FOR EACH ROW EXECUTE FUNCTION agentlab_sched.schedules_runs_unlinked();
