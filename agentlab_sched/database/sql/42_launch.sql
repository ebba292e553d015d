-- Launch: one implementation for the tick, trigger and backfill alike. A fire becomes its ledger row
-- (record_fire), and when it starts its run and Procrastinate job, after the overlap checks under the
-- schedule's row lock (launch, cancel_open_runs); a failure is counted against the schedule. The tasks
-- live workers registered decide whether a fire can start at all (task_registered, register_tasks).

-- A failure that counts against the schedule (failed run, timeout, refused fire): it may pause it.
CREATE OR REPLACE FUNCTION agentlab_sched.count_failure(sid bigint, now timestamptz DEFAULT now()) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE agentlab_sched.schedules s
    SET consecutive_failures = s.consecutive_failures + 1,
        enabled = CASE WHEN s.pause_after_failures IS NOT NULL
                            AND s.consecutive_failures + 1 >= s.pause_after_failures THEN false ELSE s.enabled END,
        paused_at = CASE WHEN s.enabled AND s.pause_after_failures IS NOT NULL
                              AND s.consecutive_failures + 1 >= s.pause_after_failures THEN now ELSE s.paused_at END,
        paused_reason = CASE WHEN s.enabled AND s.pause_after_failures IS NOT NULL
                                  AND s.consecutive_failures + 1 >= s.pause_after_failures
                             THEN NULL ELSE s.paused_reason END,
        paused_reason_code = CASE WHEN s.enabled AND s.pause_after_failures IS NOT NULL
                                       AND s.consecutive_failures + 1 >= s.pause_after_failures
                                  THEN 'schedule.paused_after_failures' ELSE s.paused_reason_code END,
        paused_reason_params = CASE WHEN s.enabled AND s.pause_after_failures IS NOT NULL
                                         AND s.consecutive_failures + 1 >= s.pause_after_failures
                                    THEN jsonb_build_object(
                                        'count', s.consecutive_failures + 1,
                                        'since', to_char(now AT TIME ZONE s.timezone, 'YYYY-MM-DD HH24:MI'),
                                        'timezone', s.timezone)
                                    ELSE s.paused_reason_params END,
        next_run_at = CASE WHEN s.pause_after_failures IS NOT NULL
                                AND s.consecutive_failures + 1 >= s.pause_after_failures THEN NULL
                           ELSE s.next_run_at END
    WHERE s.id = sid;
END
$$;

-- Write one ledger row that launches nothing. Returns its id (NULL when that fire is already recorded).
CREATE OR REPLACE FUNCTION agentlab_sched.record_fire(sid bigint, at timestamptz, fire_kind text, fire_status text,
                                                      code text, params jsonb, reason_text text,
                                                      who text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fid bigint;
BEGIN
    -- A backlog is missed due times no tick fired. When ticks fired other schedules meanwhile, the reason
    -- was not that no worker was firing: this schedule was held by another session (the tick skips a
    -- locked row).
    IF fire_status = 'skipped_misfire' AND code IN ('misfire.backlog', 'misfire.backlog_one')
       AND EXISTS (SELECT 1 FROM agentlab_sched.fires f
                   WHERE f.created_at > at + interval '2 seconds'
                     AND f.created_at < pg_catalog.clock_timestamp() - interval '2 seconds'
                     AND f.schedule_id <> sid) THEN
        code := replace(code, 'misfire.backlog', 'misfire.backlog_locked');
        reason_text := NULL;
    END IF;
    INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, reason_code, reason_params, reason,
                                      requested_by)
    VALUES (sid, at, fire_kind, fire_status, code, params,
            coalesce(reason_text, agentlab_sched.msg(code, coalesce(params, '{}'::jsonb))), who)
    ON CONFLICT ON CONSTRAINT fires_once DO NOTHING
    RETURNING id INTO fid;
    IF fid IS NOT NULL AND fire_status = 'failed_to_start' THEN
        PERFORM agentlab_sched.count_failure(sid);
    END IF;
    RETURN fid;
END
$$;

-- Launch one fire of schedule `s` (whose row the caller holds locked): the one path for scheduled,
-- misfire, manual and backfill fires. Records exactly one ledger row, or none when that
-- (schedule, fire_at, kind) is already recorded (the second guard behind the claim). Returns
-- {"fire_id", "status", "run_id", "reason"}; "status" is "duplicate" when nothing was written.
CREATE OR REPLACE FUNCTION agentlab_sched.launch(s agentlab_sched.schedules, at timestamptz, fire_kind text,
                                                 override jsonb DEFAULT NULL, who text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    blocking record;
    fid bigint;
    rid uuid;
    jid bigint;
    rendered jsonb;
    lock_key text := 'agentlab_sched:' || s.id;
    job_lock text;
    code text;
    params jsonb;
    problem text;
    session text;
BEGIN
    IF EXISTS (SELECT 1 FROM agentlab_sched.fires f
               WHERE f.schedule_id = s.id AND f.fire_at = at AND f.kind = fire_kind) THEN
        RETURN jsonb_build_object('status', 'duplicate');
    END IF;

    -- Refusals are recorded, not raised. The planner never plans more scheduled launches than remaining_runs
    -- allows; this is the guard behind it.
    IF s.remaining_runs = 0 AND fire_kind IN ('scheduled', 'misfire') THEN
        code := 'launch.no_runs_left';
        params := '{}'::jsonb;
    ELSIF NOT agentlab_sched.task_registered(s.task) THEN
        code := 'launch.unknown_task';
        params := jsonb_build_object('task', s.task);
    END IF;

    IF code IS NULL THEN
        IF s.overlap = 'skip' THEN
            SELECT r.id, r.status INTO blocking FROM agentlab_sched.runs r
            WHERE r.schedule_id = s.id AND agentlab_sched.run_is_open(r.status)
            ORDER BY r.created_at DESC LIMIT 1;
            IF FOUND THEN
                code := CASE blocking.status WHEN 'awaiting_approval' THEN 'overlap.awaiting_approval'
                                             WHEN 'suspended' THEN 'overlap.suspended'
                                             ELSE 'overlap.in_progress' END;
                params := jsonb_build_object('run', left(blocking.id::text, 6), 'run_id', blocking.id);
                fid := agentlab_sched.record_fire(s.id, at, fire_kind, 'skipped_overlap', code, params, NULL, who);
                RETURN jsonb_build_object('fire_id', fid, 'status', CASE WHEN fid IS NULL THEN 'duplicate'
                                          ELSE 'skipped_overlap' END, 'reason_code', code,
                                          'reason_params', params);
            END IF;
        ELSIF s.overlap = 'buffer_one' THEN
            -- At most one run waiting for its first start, checked here under the schedule's row lock. No
            -- Procrastinate queueing lock: a retry of the running job (todo again) would collide with it.
            -- A run retried or resumed keeps its place ahead of the waiting one (the older job, same lock).
            job_lock := lock_key;
            IF EXISTS (SELECT 1 FROM agentlab_sched.runs r
                       WHERE r.schedule_id = s.id AND r.status = 'queued' AND r.started_at IS NULL) THEN
                code := 'overlap.one_waiting';
                params := '{}'::jsonb;
                fid := agentlab_sched.record_fire(s.id, at, fire_kind, 'skipped_overlap', code, params, NULL, who);
                RETURN jsonb_build_object('fire_id', fid, 'status', CASE WHEN fid IS NULL THEN 'duplicate'
                                          ELSE 'skipped_overlap' END, 'reason_code', code,
                                          'reason_params', params);
            END IF;
        ELSIF s.overlap = 'buffer_all' THEN
            job_lock := lock_key;
        ELSIF s.overlap = 'cancel_other' THEN
            job_lock := lock_key;
            PERFORM agentlab_sched.cancel_open_runs(s.id, 'overlap.cancelled_by_newer');
        END IF;
    END IF;

    IF code IS NULL THEN
        BEGIN
            -- The sql task's command renders its placeholders as SQL literals (32_sql_task.sql).
            rendered := agentlab_sched.render_task_inputs(s.task, coalesce(override, s.inputs), at, s.timezone, s.name,
                                                          fire_kind);
        EXCEPTION WHEN invalid_parameter_value THEN
            -- Kept as the refusal's code and parameters, so that it reads in the reader's language.
            GET STACKED DIAGNOSTICS problem = PG_EXCEPTION_DETAIL;
            code := 'launch.bad_inputs';
            params := jsonb_build_object('problem', CASE WHEN problem LIKE '{%'
                THEN jsonb_build_object('msg', problem::jsonb ->> 'code', 'params', problem::jsonb -> 'params')
                ELSE to_jsonb(SQLERRM) END);
        END;
    END IF;

    IF code IS NOT NULL THEN
        fid := agentlab_sched.record_fire(s.id, at, fire_kind, 'failed_to_start', code, params, NULL, who);
        RETURN jsonb_build_object('fire_id', fid, 'status', CASE WHEN fid IS NULL THEN 'duplicate'
                                  ELSE 'failed_to_start' END, 'reason_code', code, 'reason_params', params);
    END IF;

    IF s.context = 'persistent' THEN
        session := s.session_key;
        IF session IS NULL THEN
            session := 'agentlab_sched:' || s.id || ':' || gen_random_uuid();
            UPDATE agentlab_sched.schedules SET session_key = session WHERE id = s.id;
        END IF;
    ELSE
        session := gen_random_uuid()::text;
    END IF;

    rid := gen_random_uuid();
    INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, inputs, run_id, requested_by)
    VALUES (s.id, at, fire_kind, 'started', rendered, rid, who)
    ON CONFLICT ON CONSTRAINT fires_once DO NOTHING
    RETURNING id INTO fid;
    IF fid IS NULL THEN
        RETURN jsonb_build_object('status', 'duplicate');
    END IF;

    jid := (agentlab_sched.defer_jobs(ARRAY[ROW(s.queue, s.task, s.priority, job_lock, NULL, rendered,
                                         NULL)::public.procrastinate_job_to_defer_v1]))[1];
    INSERT INTO agentlab_sched.runs (id, schedule_id, fire_id, task, inputs, status, job_id, started_by, timeout,
                                     session_key)
    VALUES (rid, s.id, fid, s.task, rendered, 'queued', jid,
            CASE WHEN fire_kind IN ('manual', 'backfill') AND who IS NOT NULL THEN who
                 ELSE 'schedule:' || s.name END,
            s.timeout, session);
    -- Only scheduled and caught-up fires count against remaining_runs; manual and backfill fires do not
    -- (as Temporal's limited actions), and are allowed at 0.
    IF s.remaining_runs IS NOT NULL AND fire_kind IN ('scheduled', 'misfire') THEN
        -- Bookkeeping, not a change of the definition: the mark tells the validation trigger so.
        INSERT INTO agentlab_sched.bookkeeping_marks (schedule_id, kind) VALUES (s.id, 'countdown')
        ON CONFLICT DO NOTHING;
        UPDATE agentlab_sched.schedules SET remaining_runs = greatest(remaining_runs - 1, 0) WHERE id = s.id;
        DELETE FROM agentlab_sched.bookkeeping_marks m
        WHERE m.xact = pg_current_xact_id() AND m.schedule_id = s.id AND m.kind = 'countdown';
    END IF;
    RETURN jsonb_build_object('fire_id', fid, 'status', 'started', 'run_id', rid, 'job_id', jid);
END
$$;

-- Cancel the open runs of a schedule (overlap cancel_other): a waiting job is cancelled, a running one
-- is asked to abort (Procrastinate delivers it); runs with no job running end at once, and the job of a
-- suspended run (doing on a worker that is gone, holding the schedule's lock) is ended as `runs cancel`
-- ends it, so the new run is not held up.
--
-- The lock order. A worker finishing a job locks the job row, then its run (follow_job), then the
-- schedule (counting a failure): job, run, schedule. The tick comes here already holding the schedule
-- (its claim), so it must never wait for a job or a run: it takes them with NOWAIT, jobs before runs, and
-- if one is held (a job being finished right now) lock_not_available aborts this fire, which the tick
-- treats as transient: the schedule stays due and the next tick fires it, once the job has finished. So
-- nobody ever waits against that order, and no deadlock can form.
CREATE OR REPLACE FUNCTION agentlab_sched.cancel_open_runs(sid bigint, code text) RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    n integer := 0;
BEGIN
    PERFORM 1 FROM public.procrastinate_jobs j
    WHERE j.id IN (SELECT job_id FROM agentlab_sched.runs
                   WHERE schedule_id = sid AND job_id IS NOT NULL
                     AND agentlab_sched.run_is_open(status))
    ORDER BY j.id FOR UPDATE NOWAIT;
    FOR r IN SELECT x.id, x.job_id, x.status, j.status::text AS job_status FROM agentlab_sched.runs x
             LEFT JOIN public.procrastinate_jobs j ON j.id = x.job_id
             WHERE x.schedule_id = sid AND agentlab_sched.run_is_open(x.status)
             ORDER BY x.id FOR UPDATE OF x NOWAIT LOOP
        UPDATE agentlab_sched.runs SET abort_reason = code, error = agentlab_sched.msg(code), error_code = code, error_term = agentlab_sched.term(code)
        WHERE id = r.id;
        IF agentlab_sched.run_is_held(r.status) THEN
            UPDATE agentlab_sched.runs SET status = 'cancelled', finished_at = now(), deadline_at = NULL
            WHERE id = r.id AND agentlab_sched.run_is_held(status);
        END IF;
        IF r.status = 'suspended' AND r.job_status = 'doing' THEN
            PERFORM public.procrastinate_finish_job_v1(r.job_id, 'aborted', false);
        ELSIF r.job_status IN ('todo', 'doing') THEN
            -- Any job still waiting or running (also an approved run's next segment, not started yet).
            PERFORM public.procrastinate_cancel_job_v1(r.job_id, true, false);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- The tasks a live worker has registered within the known-task window (limits.py's known_task_seconds).
-- The set-based launch reads them once a batch; task_registered() asks for one.
CREATE OR REPLACE FUNCTION agentlab_sched.registered_tasks() RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(k.task), '{}') FROM agentlab_sched.known_tasks k
    WHERE k.seen_at > clock_timestamp() - agentlab_sched.policy_interval('known_task_seconds')
$$;

-- Whether a live worker has registered `task` (registered_tasks()): launch() refuses a fire of a task
-- nobody runs, the set-based launch leaves it to launch(). Saving a schedule for a task that is not
-- registered warns; doctor lists them.
CREATE OR REPLACE FUNCTION agentlab_sched.task_registered(task text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT task_registered.task = ANY (agentlab_sched.registered_tasks())
$$;

-- Register the tasks a live worker can run (a fire for a task nobody runs is refused, not queued).
-- PL/pgSQL, the time a value: on Citus, where known_tasks is a reference table, a statement of a
-- SQL-language function with parameters cannot be planned (docs/scaling.md).
CREATE OR REPLACE FUNCTION agentlab_sched.register_tasks(names text[]) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seen timestamptz := clock_timestamp();
BEGIN
    INSERT INTO agentlab_sched.known_tasks (task, seen_at)
    SELECT DISTINCT unnest(names), seen
    ON CONFLICT (task) DO UPDATE SET seen_at = excluded.seen_at;
END
$$;
