-- The worker side of runs: what the run middleware (agentlab_sched/worker/middleware.py) and the batch
-- worker call while a job runs: its run's context, an approval asked for, the task's result or error, a
-- shutdown, a job handed back, a task nobody registered, a task that ended after it was asked to abort;
-- and renewing a persistent session.
--
-- Every function that acts on a run locks the run's current job first and the run second, the order the
-- job trigger uses (50_runs.sql), so a request never deadlocks with a worker finishing the job. Requests
-- that cannot apply (approving twice, resuming a run that is not suspended, ...) raise with SQLSTATE 55000
-- and change nothing; unknown runs raise P0002. Functions that depend on the time take `now` (the
-- database clock by default) so tests drive the clock.

-- Everything a task may read about its run (context.current_run()), looked up by its job; NULL for a
-- job that is not a run's. seconds_left: until the run's deadline, by the database clock. For a job whose
-- run is not running (cancelled while the job was being fetched, ...) only its id and status: the
-- middleware does not run such a body.
-- For many jobs in one query (`agentlab-sched worker` reads them with the jobs it takes, fetch_jobs): one
-- row per job that is a run's; run_context() reads one.
-- PL/pgSQL, not SQL, so that its plan is kept (below): a SQL function's query is planned
-- at every call, which over the partitioned runs and fires reads every partition's indexes.
CREATE OR REPLACE FUNCTION agentlab_sched.run_contexts(jobs bigint[]) RETURNS TABLE (job_id bigint, context jsonb)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- Index lookups from the jobs asked for, whatever the statistics say (a body planned without the array's
-- values, on tables analysed near empty, would hash-join a scan of every run).
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
-- One plan for the session (each look-up is by key, whatever the jobs): planned anew at each call, the
-- look-ups in every partition of runs and fires cost more than the query (2.5 ms a call in a storm).
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT r.job_id, CASE WHEN r.status <> 'running' THEN jsonb_build_object('run_id', r.id, 'status', r.status)
           ELSE jsonb_build_object(
        'run_id', r.id, 'status', r.status, 'fire_id', r.fire_id, 'fire_at', f.fire_at, 'kind', f.kind,
        'schedule_id', r.schedule_id, 'schedule', s.name, 'segment', r.segment,
        'session_key', r.session_key, 'state', r.state, 'inputs', r.inputs, 'task', r.task,
        'started_by', r.started_by, 'timeout_seconds', extract(epoch FROM r.timeout),
        'seconds_left', extract(epoch FROM r.deadline_at - clock_timestamp()),
        -- How late the job starts after its fire's due time (a worker's metrics and run line).
        'late_seconds', extract(epoch FROM clock_timestamp() - f.fire_at),
        'approval', (SELECT to_jsonb(a) - 'job_id' FROM agentlab_sched.approvals a
                     WHERE a.run_id = r.id AND a.segment = r.segment - 1)) END
    -- Each row looked up by its key from the one before (OFFSET 0 keeps each look-up a subquery of its
    -- own): the plan is kept for the session, and a join planned while the day's partitions were nearly
    -- empty read every run of the day for each job once they filled.
    FROM unnest(jobs) AS j(id)
    CROSS JOIN LATERAL (SELECT * FROM agentlab_sched.runs x WHERE x.job_id = j.id OFFSET 0) r
    LEFT JOIN LATERAL (SELECT x.fire_at, x.kind FROM agentlab_sched.fires x WHERE x.id = r.fire_id OFFSET 0) f ON true
    LEFT JOIN LATERAL (SELECT x.name FROM agentlab_sched.schedules x WHERE x.id = r.schedule_id OFFSET 0) s ON true;
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.run_context(job bigint) RETURNS jsonb
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.context FROM agentlab_sched.run_contexts(ARRAY[job]) c
$$;

-- The task asked for approval (raise AwaitApproval): the run waits, with a pending approval for its
-- segment. Returns the segment, or NULL when the run is no longer this job's running run (cancelled
-- meanwhile: nothing is written).
CREATE OR REPLACE FUNCTION agentlab_sched.await_approval(run_id uuid, job bigint, title text, state jsonb)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seg integer;
BEGIN
    IF title IS NULL OR char_length(btrim(title)) = 0 OR char_length(title) > 500 THEN
        PERFORM agentlab_sched.fail('run.bad_title', 'title');
    END IF;
    UPDATE agentlab_sched.runs r
    SET status = 'awaiting_approval', state = await_approval.state, deadline_at = NULL, error = NULL,
        error_code = NULL, error_term = NULL, updated_at = now()
    WHERE r.id = await_approval.run_id AND r.job_id = job AND r.status = 'running'
    RETURNING r.segment INTO seg;
    IF seg IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO agentlab_sched.approvals (run_id, segment, title, state, job_id)
    VALUES (await_approval.run_id, seg, title, await_approval.state, job)
    ON CONFLICT ON CONSTRAINT approvals_run_id_segment_key DO UPDATE
        SET title = excluded.title, state = excluded.state, job_id = excluded.job_id, status = 'pending',
            decided_by = NULL, decided_label = NULL, decided_at = NULL, comment = NULL, created_at = now();
    RETURN seg;
END
$$;

-- The task raised: its message becomes the run's error (the job trigger then marks the run failed, or
-- queued again when Procrastinate retries it). Also what the run becomes if the job is deleted instead of
-- finished (runs.outcome). With `params`, the error is a message of the catalogue (code), rendered in the
-- reader's language when read; without, the task's own words, kept as written.
CREATE OR REPLACE FUNCTION agentlab_sched.record_task_error(run_id uuid, job bigint, message text, code text,
                                                            params jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE agentlab_sched.runs r SET error = left(message, 4000), error_code = code,
                                     error_term = CASE WHEN params IS NOT NULL THEN agentlab_sched.term(code, params) END,
                                     outcome = 'failed', updated_at = now()
    WHERE r.id = run_id AND r.job_id = job AND r.status = 'running'
    RETURNING true
$$;

-- The task returned: keep its result (JSON, or NULL for none) with the run; the run succeeds when its job
-- is finished, or deleted (runs.outcome). Many at once (`agentlab-sched worker` writes them in the statement that ends their jobs, finish_jobs):
-- run_ids[i] ran as job jobs[i] and returned vals[i]. Returns how many runs were still running.
CREATE OR REPLACE FUNCTION agentlab_sched.record_results(run_ids uuid[], jobs bigint[], vals jsonb[])
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH done AS (
        UPDATE agentlab_sched.runs r SET result = x.value, outcome = 'succeeded', updated_at = now()
        FROM unnest(run_ids, jobs, vals) AS x(run_id, job, value)
        WHERE r.id = x.run_id AND r.job_id = x.job AND r.status = 'running'
        RETURNING 1)
    SELECT count(*)::integer FROM done
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.record_result(run_id uuid, job bigint, value jsonb) RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN agentlab_sched.record_results(ARRAY[run_id], ARRAY[job], ARRAY[value]) > 0 THEN true END
$$;

-- The task was aborted by a stopping worker (or ended after any abort): recorded for a job deleted
-- instead of finished. A timeout or cancel already asked for is kept; without one, the run is
-- interrupted (suspended, or what its schedule's on_interrupt says), never cancelled.
CREATE OR REPLACE FUNCTION agentlab_sched.mark_shutdown(run_id uuid, job bigint) RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE agentlab_sched.runs r SET abort_reason = coalesce(r.abort_reason, 'shutdown'), outcome = 'aborted',
                                     updated_at = now()
    WHERE r.id = run_id AND r.job_id = job AND r.status = 'running'
    RETURNING true
$$;

-- What a stopping worker's interrupted run `run_id` becomes when its job ends (interrupt_outcome()).
CREATE OR REPLACE FUNCTION agentlab_sched.shutdown_outcome(run_id uuid) RETURNS text
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT agentlab_sched.interrupt_outcome(agentlab_sched.interrupt_policy(r.schedule_id), r.interrupts)
    FROM agentlab_sched.runs r WHERE r.id = run_id
$$;

-- A stopping worker hands back the job of a run whose body never started (it could not look the run up
-- in time): todo again, so the run is queued for the next worker. True when it was handed back.
CREATE OR REPLACE FUNCTION agentlab_sched.hand_back_job(job bigint) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM 1 FROM public.procrastinate_jobs j WHERE j.id = job AND j.status = 'doing' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM public.procrastinate_retry_job_v2(job, NULL, NULL, NULL, NULL);
    RETURN true;
END
$$;

-- A worker took the job of a run whose task its app does not have (Procrastinate fails it before any
-- middleware runs): the run's error says so.
CREATE OR REPLACE FUNCTION agentlab_sched.record_unknown_task(job bigint) RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE agentlab_sched.runs r
    SET error = agentlab_sched.msg('run.task_unknown', jsonb_build_object('task', r.task)),
        error_code = 'run.task_unknown', error_term = agentlab_sched.term('run.task_unknown', jsonb_build_object('task', r.task)), outcome = 'failed',
        updated_at = now()
    WHERE r.job_id = job AND r.status = 'running'
    RETURNING true
$$;

-- A task ended after it was asked to abort (a synchronous task that returned anyway, or that checked
-- context.should_abort()): for a timeout, the run's error says how late it stopped. Returns the abort
-- reason ('timeout', 'cancel', ...) or NULL.
CREATE OR REPLACE FUNCTION agentlab_sched.finish_after_abort(run_id uuid, job bigint,
                                                             now timestamptz DEFAULT clock_timestamp(),
                                                             abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'))
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    late interval;
    code text;
    params jsonb;
BEGIN
    SELECT * INTO r FROM agentlab_sched.runs x WHERE x.id = run_id AND x.job_id = job FOR UPDATE;
    IF NOT FOUND OR r.abort_reason IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE agentlab_sched.runs x SET outcome = 'aborted' WHERE x.id = r.id AND x.status = 'running';
    IF r.abort_reason = 'timeout' THEN
        late := now - coalesce(r.abort_requested_at, now);
        code := CASE WHEN late > abort_grace THEN 'run.timed_out_late' ELSE 'run.timed_out' END;
        params := agentlab_sched.run_timeout_params(r.timeout) || CASE WHEN late > abort_grace
            THEN jsonb_build_object('late', jsonb_build_object('duration', extract(epoch FROM late))) ELSE '{}'::jsonb END;
        UPDATE agentlab_sched.runs x
        SET error = agentlab_sched.msg(code, params), error_code = code, error_term = agentlab_sched.term(code, params), updated_at = now()
        WHERE x.id = r.id;
    END IF;
    RETURN r.abort_reason;
END
$$;

-- The same, from inside a run (context.renew_session()): a persistent schedule gets a new key, and the
-- run uses it from now on; an isolated run gets a fresh key of its own. Returns the new key.
CREATE OR REPLACE FUNCTION agentlab_sched.renew_session(run_id uuid) RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    s agentlab_sched.schedules;
    new_key text;
BEGIN
    SELECT * INTO r FROM agentlab_sched.runs x WHERE x.id = run_id;
    IF NOT FOUND THEN
        PERFORM agentlab_sched.fail('run.not_found', 'run_id', jsonb_build_object('run', run_id));
    END IF;
    SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.id = r.schedule_id;
    IF FOUND AND s.context = 'persistent' THEN
        new_key := agentlab_sched.reset_session(s.name);
    ELSE
        new_key := gen_random_uuid()::text;
    END IF;
    UPDATE agentlab_sched.runs x SET session_key = new_key, updated_at = now() WHERE x.id = run_id;
    RETURN new_key;
END
$$;
