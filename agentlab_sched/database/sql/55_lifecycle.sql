-- The run lifecycle (docs/runs.md): approvals, suspended runs, timeouts, cancelling, retention.
--
-- A run follows its Procrastinate job (50_runs.sql); these functions are the people's side of it and the
-- checks housekeeping makes. Every function that acts on a run locks the run's current job first and
-- the run second, the order the job trigger uses, so a request never deadlocks with a worker finishing
-- the job. Requests that cannot apply (approving twice, resuming a run that is not suspended, ...) raise
-- with SQLSTATE 55000 and change nothing; unknown runs raise P0002. Functions that depend on the time
-- take `now` (the database clock by default) so tests drive the clock.
--
-- Re-applied by every migrate (CREATE OR REPLACE): a function whose arguments change must be dropped
-- first (DROP FUNCTION IF EXISTS with the old signature).

-- '#' + the first 6 characters of a run id, as the ledger's overlap reasons show it.
CREATE OR REPLACE FUNCTION agentlab_sched.run_ref(id uuid) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT left(id::text, 6)
$$;

-- A run status (or approval decision) as a message term, so it reads in the reader's language.
CREATE OR REPLACE FUNCTION agentlab_sched.status_term(prefix text, status text) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('msg', prefix || '.status.' || status)
$$;

-- The run a reference names: a full id, or its first characters (at least 4, '#' and '-' allowed, as
-- the CLI shows them). Unknown -> P0002; a prefix naming several runs -> 22023 with the count.
CREATE OR REPLACE FUNCTION agentlab_sched.find_run(ref text) RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    raw text := lower(btrim(coalesce(ref, '')));
    hex text;
    found uuid;
    n integer;
BEGIN
    raw := ltrim(raw, '#');
    hex := replace(raw, '-', '');
    IF hex !~ '^[0-9a-f]{4,32}$' THEN
        PERFORM agentlab_sched.fail('run.bad_ref', 'run_id', jsonb_build_object('run', ref));
    END IF;
    IF length(hex) = 32 THEN
        SELECT r.id INTO found FROM agentlab_sched.runs r WHERE r.id = hex::uuid;
        n := CASE WHEN found IS NULL THEN 0 ELSE 1 END;
    ELSE
        -- A range on the primary key: the ids that start with these characters.
        SELECT count(*), min(r.id::text)::uuid INTO n, found
        FROM (SELECT r.id FROM agentlab_sched.runs r
              WHERE r.id BETWEEN rpad(hex, 32, '0')::uuid AND rpad(hex, 32, 'f')::uuid LIMIT 100) r;
    END IF;
    IF n = 0 THEN
        PERFORM agentlab_sched.fail('run.not_found', 'run_id', jsonb_build_object('run', ref));
    ELSIF n > 1 THEN
        PERFORM agentlab_sched.fail('run.ambiguous', 'run_id', jsonb_build_object('run', ref, 'count', n));
    END IF;
    RETURN found;
END
$$;

-- Lock a run for a lifecycle request: its current job first, then the run (the job trigger's order).
CREATE OR REPLACE FUNCTION agentlab_sched.lock_run(run_id uuid) RETURNS agentlab_sched.runs
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    jid bigint;
    r agentlab_sched.runs;
BEGIN
    LOOP
        SELECT x.job_id INTO jid FROM agentlab_sched.runs x WHERE x.id = lock_run.run_id;
        IF NOT FOUND THEN
            PERFORM agentlab_sched.fail('run.not_found', 'run_id', jsonb_build_object('run', run_id));
        END IF;
        IF jid IS NOT NULL THEN
            PERFORM 1 FROM public.procrastinate_jobs j WHERE j.id = jid FOR UPDATE;
        END IF;
        SELECT * INTO r FROM agentlab_sched.runs x WHERE x.id = lock_run.run_id FOR UPDATE;
        EXIT WHEN r.job_id IS NOT DISTINCT FROM jid;  -- moved to another job meanwhile: lock that one
    END LOOP;
    RETURN r;
END
$$;

-- Who decides, and what they said: checked before anything is written.
CREATE OR REPLACE FUNCTION agentlab_sched.check_decision(by text, comment text, segment integer) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF by IS NULL OR char_length(btrim(by)) = 0 OR char_length(by) > 200 OR by ~ '[[:cntrl:]]' THEN
        PERFORM agentlab_sched.fail('run.bad_by', 'by');
    END IF;
    IF char_length(comment) > 2000 THEN
        PERFORM agentlab_sched.fail('run.comment_too_long', 'comment',
                                    jsonb_build_object('length', char_length(comment), 'max', 2000));
    END IF;
    IF segment IS NOT NULL AND segment < 1 THEN
        PERFORM agentlab_sched.fail('run.bad_segment', 'segment', jsonb_build_object('value', segment));
    END IF;
END
$$;

-- The pending approval of a run that waits for one (locked), or the reason it cannot be decided.
CREATE OR REPLACE FUNCTION agentlab_sched.pending_approval(r agentlab_sched.runs, asked_segment integer)
RETURNS agentlab_sched.approvals
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a agentlab_sched.approvals;
    tz text;
BEGIN
    IF r.status <> 'awaiting_approval' THEN
        IF agentlab_sched.run_is_final(r.status) THEN
            PERFORM agentlab_sched.fail('run.already_ended', 'run_id', jsonb_build_object(
                'run', agentlab_sched.run_ref(r.id), 'status', agentlab_sched.status_term('run', r.status)));
        END IF;
        PERFORM agentlab_sched.fail('run.not_awaiting', 'run_id', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'status', agentlab_sched.status_term('run', r.status)));
    END IF;
    IF asked_segment IS NOT NULL AND asked_segment <> r.segment THEN
        PERFORM agentlab_sched.fail('run.stale_segment', 'segment', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'current', r.segment, 'segment', asked_segment));
    END IF;
    SELECT * INTO a FROM agentlab_sched.approvals x WHERE x.run_id = r.id AND x.segment = r.segment FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM agentlab_sched.fail('run.not_awaiting', 'run_id', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'status', agentlab_sched.status_term('run', r.status)));
    END IF;
    IF a.status <> 'pending' THEN
        SELECT s.timezone INTO tz FROM agentlab_sched.schedules s WHERE s.id = r.schedule_id;
        tz := coalesce(tz, 'UTC');
        PERFORM agentlab_sched.fail('run.already_decided', 'run_id', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'segment', a.segment,
            'decision', agentlab_sched.status_term('approval', a.status),
            'by', CASE WHEN a.decided_label IS NULL OR a.decided_label = a.decided_by THEN a.decided_by
                       ELSE a.decided_label || ' (' || a.decided_by || ')' END,
            'at', agentlab_sched.local_time_text(date_trunc('second', a.decided_at), tz), 'timezone', tz));
    END IF;
    RETURN a;
END
$$;

-- A new Procrastinate job for a run (its next segment, or a resumed run whose job is gone): the task and
-- inputs of the run; queue, priority and lock of its previous job, else of its schedule.
CREATE OR REPLACE FUNCTION agentlab_sched.defer_run_job(r agentlab_sched.runs) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q text;
    p integer;
    l text;
BEGIN
    SELECT j.queue_name, j.priority, j.lock INTO q, p, l FROM public.procrastinate_jobs j WHERE j.id = r.job_id;
    IF NOT FOUND THEN
        SELECT s.queue, s.priority,
               CASE WHEN s.overlap IN ('buffer_one', 'buffer_all', 'cancel_other') THEN 'agentlab_sched:' || s.id END
        INTO q, p, l
        FROM agentlab_sched.schedules s WHERE s.id = r.schedule_id;
    END IF;
    RETURN (public.procrastinate_defer_jobs_v1(ARRAY[ROW(coalesce(q, 'default'), r.task, coalesce(p, 0), l, NULL,
                                                   r.inputs, NULL)::public.procrastinate_job_to_defer_v1]))[1];
END
$$;

-- ------------------------------------------------------------------------------------------------
-- What the worker middleware calls (agentlab_sched/middleware.py)
-- ------------------------------------------------------------------------------------------------

-- Everything a task may read about its run (context.current_run()), looked up by its job; NULL for a
-- job that is not a run's. seconds_left: until the run's deadline, by the database clock. For a job whose
-- run is not running (cancelled while the job was being fetched, ...) only its id and status: the
-- middleware does not run such a body.
-- For many jobs in one query (`agentlab-sched worker` reads them with the jobs it takes, fetch_jobs): one
-- row per job that is a run's; run_context() reads one.
CREATE OR REPLACE FUNCTION agentlab_sched.run_contexts(jobs bigint[]) RETURNS TABLE (job_id bigint, context jsonb)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- Index lookups from the jobs asked for, whatever the statistics say (a body planned without the array's
-- values, on tables analysed near empty, would hash-join a scan of every run).
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
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
    FROM unnest(jobs) AS j(id)
    JOIN agentlab_sched.runs r ON r.job_id = j.id
    LEFT JOIN agentlab_sched.fires f ON f.id = r.fire_id
    LEFT JOIN agentlab_sched.schedules s ON s.id = r.schedule_id
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
        error_code = NULL, updated_at = now()
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
-- finished (runs.outcome).
CREATE OR REPLACE FUNCTION agentlab_sched.record_task_error(run_id uuid, job bigint, message text, code text)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE agentlab_sched.runs r SET error = left(message, 4000), error_code = code, outcome = 'failed',
                                     updated_at = now()
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
        error_code = 'run.task_unknown', outcome = 'failed', updated_at = now()
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
BEGIN
    SELECT * INTO r FROM agentlab_sched.runs x WHERE x.id = run_id AND x.job_id = job FOR UPDATE;
    IF NOT FOUND OR r.abort_reason IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE agentlab_sched.runs x SET outcome = 'aborted' WHERE x.id = r.id AND x.status = 'running';
    IF r.abort_reason = 'timeout' THEN
        late := now - coalesce(r.abort_requested_at, now);
        UPDATE agentlab_sched.runs x SET
            error = CASE WHEN late > abort_grace
                         THEN agentlab_sched.msg('run.timed_out_late', jsonb_build_object(
                             'timeout', jsonb_build_object('duration', extract(epoch FROM r.timeout)), 'late', jsonb_build_object('duration', extract(epoch FROM late))))
                         ELSE agentlab_sched.msg('run.timed_out', jsonb_build_object(
                             'timeout', jsonb_build_object('duration', extract(epoch FROM r.timeout)))) END,
            error_code = CASE WHEN late > abort_grace THEN 'run.timed_out_late' ELSE 'run.timed_out' END,
            updated_at = now()
        WHERE x.id = r.id;
    END IF;
    RETURN r.abort_reason;
END
$$;

-- ------------------------------------------------------------------------------------------------
-- Approvals
-- ------------------------------------------------------------------------------------------------

-- approve() and reject() no longer take the caller's clock: a decision is made at the database's time.

-- Approve the pending approval of a run (of `segment`, when given: a stale segment is refused): the
-- run continues in a new job, its next segment receiving its state and this approval. Until that job
-- starts the run still counts as awaiting approval (overlap, reasons). The approval records the login
-- role (session_user) and the database clock; `by` is kept as a label (decided_label). Returns the new
-- job's id.
CREATE OR REPLACE FUNCTION agentlab_sched.approve(run_id uuid, by text DEFAULT NULL,
                                                  comment text DEFAULT NULL, segment integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    a agentlab_sched.approvals;
    jid bigint;
BEGIN
    PERFORM agentlab_sched.check_decision(coalesce(by, session_user), comment, segment);
    r := agentlab_sched.lock_run(run_id);
    a := agentlab_sched.pending_approval(r, segment);
    UPDATE agentlab_sched.approvals x
    SET status = 'approved', decided_by = session_user, decided_label = approve.by, decided_at = now(),
        comment = approve.comment
    WHERE x.id = a.id;
    jid := agentlab_sched.defer_run_job(r);
    UPDATE agentlab_sched.runs x SET job_id = jid, updated_at = now() WHERE x.id = r.id;
    RETURN jid;
END
$$;

-- Reject the pending approval of a run: the run is cancelled, its error saying who rejected it and why
-- (recorded as approve() records).
CREATE OR REPLACE FUNCTION agentlab_sched.reject(run_id uuid, by text DEFAULT NULL,
                                                 comment text DEFAULT NULL, segment integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    a agentlab_sched.approvals;
    who text := agentlab_sched.decider(reject.by);
BEGIN
    PERFORM agentlab_sched.check_decision(coalesce(by, session_user), comment, segment);
    r := agentlab_sched.lock_run(run_id);
    a := agentlab_sched.pending_approval(r, segment);
    UPDATE agentlab_sched.approvals x
    SET status = 'rejected', decided_by = session_user, decided_label = reject.by, decided_at = now(),
        comment = reject.comment
    WHERE x.id = a.id;
    UPDATE agentlab_sched.runs x
    SET status = 'cancelled', finished_at = now(), cancelled_by = who, deadline_at = NULL, abort_reason = 'rejected',
        error = CASE WHEN nullif(btrim(reject.comment), '') IS NULL
                     THEN agentlab_sched.msg('run.rejected_by', jsonb_build_object('by', who))
                     ELSE agentlab_sched.msg('run.rejected_by_saying', jsonb_build_object('by', who, 'comment', reject.comment)) END,
        error_code = 'run.rejected', updated_at = now()
    WHERE x.id = r.id;
    RETURN 'cancelled';
END
$$;

-- ------------------------------------------------------------------------------------------------
-- Suspended runs: resume, abandon; cancel any run
-- ------------------------------------------------------------------------------------------------

-- Re-queue a suspended run: its stalled job is retried (Procrastinate retry), or, when that job is gone
-- or already ended, a new job is deferred. Returns the job id.
CREATE OR REPLACE FUNCTION agentlab_sched.resume_run(run_id uuid, by text DEFAULT current_user,
                                                     now timestamptz DEFAULT now())
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    j record;
    jid bigint;
BEGIN
    PERFORM agentlab_sched.check_decision(by, NULL, NULL);
    r := agentlab_sched.lock_run(run_id);
    PERFORM agentlab_sched.require_suspended(r);
    SELECT pj.id, pj.status::text AS status, pj.abort_requested INTO j FROM public.procrastinate_jobs pj WHERE pj.id = r.job_id;
    IF j.id IS NOT NULL AND j.status = 'doing' AND NOT j.abort_requested THEN
        -- doing -> todo: the job trigger puts the run back to queued.
        PERFORM public.procrastinate_retry_job_v2(r.job_id, NULL, NULL, NULL, NULL);
        jid := r.job_id;
    ELSE
        -- The job is gone or cannot be retried: a new one; the run moves to it before the old one ends,
        -- so that the old job's end does not end the run.
        jid := agentlab_sched.defer_run_job(r);
        UPDATE agentlab_sched.runs x SET job_id = jid WHERE x.id = r.id;
        IF j.id IS NOT NULL AND j.status = 'doing' THEN
            PERFORM public.procrastinate_finish_job_v1(j.id, 'aborted', false);
        END IF;
    END IF;
    UPDATE agentlab_sched.runs x
    SET status = 'queued', job_id = jid, error = NULL, error_code = NULL, abort_reason = NULL,
        abort_requested_at = NULL, finished_at = NULL, interrupts = 0, updated_at = now
    WHERE x.id = r.id;
    RETURN jid;
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.require_suspended(r agentlab_sched.runs) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF agentlab_sched.run_is_final(r.status) THEN
        PERFORM agentlab_sched.fail('run.already_ended', 'run_id', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'status', agentlab_sched.status_term('run', r.status)));
    ELSIF r.status <> 'suspended' THEN
        PERFORM agentlab_sched.fail('run.not_suspended', 'run_id', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'status', agentlab_sched.status_term('run', r.status)));
    END IF;
END
$$;

-- Give up on a suspended run: it is cancelled (its stalled job ends aborted).
CREATE OR REPLACE FUNCTION agentlab_sched.abandon(run_id uuid, by text DEFAULT current_user,
                                                  now timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
BEGIN
    PERFORM agentlab_sched.check_decision(by, NULL, NULL);
    r := agentlab_sched.lock_run(run_id);
    PERFORM agentlab_sched.require_suspended(r);
    UPDATE agentlab_sched.runs x
    SET status = 'cancelled', finished_at = now, cancelled_by = by, abort_reason = 'abandoned',
        error = agentlab_sched.msg('run.abandoned_by', jsonb_build_object('by', by)), error_code = 'run.abandoned',
        deadline_at = NULL, updated_at = now
    WHERE x.id = r.id;
    IF EXISTS (SELECT 1 FROM public.procrastinate_jobs j WHERE j.id = r.job_id AND j.status = 'doing') THEN
        PERFORM public.procrastinate_finish_job_v1(r.job_id, 'aborted', false);
    END IF;
    RETURN 'cancelled';
END
$$;

-- Settle many suspended runs at once: those of schedule `name` (every schedule's when NULL), oldest first,
-- each as resume_run() / abandon() does it. A run that moved on meanwhile is passed over. Returns how many
-- were resumed / abandoned; an unknown schedule name raises (P0002).
CREATE OR REPLACE FUNCTION agentlab_sched.resume_suspended(name text DEFAULT NULL, by text DEFAULT current_user,
                                                           now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN agentlab_sched.settle_suspended(name, by, now, 'resume');
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.abandon_suspended(name text DEFAULT NULL, by text DEFAULT current_user,
                                                            now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN agentlab_sched.settle_suspended(name, by, now, 'abandon');
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.settle_suspended(name text, by text, now timestamptz, action text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sid bigint;
    rid uuid;
    n integer := 0;
BEGIN
    PERFORM agentlab_sched.check_decision(by, NULL, NULL);
    IF name IS NOT NULL THEN
        SELECT s.id INTO sid FROM agentlab_sched.schedules s WHERE s.name = name;
        IF NOT FOUND THEN
            PERFORM agentlab_sched.fail('schedule.not_found', 'name', jsonb_build_object('name', name));
        END IF;
    END IF;
    FOR rid IN SELECT r.id FROM agentlab_sched.runs r
               WHERE r.status = 'suspended' AND (name IS NULL OR r.schedule_id = sid)
               ORDER BY r.created_at, r.id LOOP
        BEGIN
            IF action = 'resume' THEN
                PERFORM agentlab_sched.resume_run(rid, by, now);
            ELSE
                PERFORM agentlab_sched.abandon(rid, by, now);
            END IF;
            n := n + 1;
        EXCEPTION WHEN object_not_in_prerequisite_state THEN
            NULL;  -- no longer suspended: someone settled it meanwhile
        END;
    END LOOP;
    RETURN n;
END
$$;

-- Cancel a run that has not ended. A running one is aborted through Procrastinate (an async task is
-- cancelled at once, a sync task must check context.should_abort()) and ends cancelled when its job
-- ends: returns 'abort_requested'. Any other is cancelled now: returns 'cancelled'.
CREATE OR REPLACE FUNCTION agentlab_sched.cancel_run(run_id uuid, by text DEFAULT current_user,
                                                     now timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
    js text;
BEGIN
    PERFORM agentlab_sched.check_decision(by, NULL, NULL);
    r := agentlab_sched.lock_run(run_id);
    IF agentlab_sched.run_is_final(r.status) THEN
        PERFORM agentlab_sched.fail('run.already_ended', 'run_id', jsonb_build_object(
            'run', agentlab_sched.run_ref(r.id), 'status', agentlab_sched.status_term('run', r.status)));
    END IF;
    SELECT j.status::text INTO js FROM public.procrastinate_jobs j WHERE j.id = r.job_id;
    UPDATE agentlab_sched.runs x
    SET abort_reason = 'cancel', abort_requested_at = now, cancelled_by = by,
        error = agentlab_sched.msg('run.cancelled_by', jsonb_build_object('by', by)), error_code = 'run.cancelled',
        updated_at = now
    WHERE x.id = r.id;
    IF r.status = 'running' AND js = 'doing' THEN
        PERFORM public.procrastinate_cancel_job_v1(r.job_id, true, false);
        RETURN 'abort_requested';
    END IF;
    UPDATE agentlab_sched.runs x SET status = 'cancelled', finished_at = now, deadline_at = NULL WHERE x.id = r.id;
    IF js = 'todo' THEN
        PERFORM public.procrastinate_cancel_job_v1(r.job_id, true, false);
    ELSIF js = 'doing' THEN
        PERFORM public.procrastinate_finish_job_v1(r.job_id, 'aborted', false);
    END IF;
    RETURN 'cancelled';
END
$$;

-- ------------------------------------------------------------------------------------------------
-- Housekeeping checks: suspended runs, timeouts
-- ------------------------------------------------------------------------------------------------

-- Runs whose job is `doing` on a worker that stopped heartbeating for `stalled_after` (Procrastinate's
-- stalled jobs), or whose job is gone: interrupted (interrupt_run: suspended with an error saying what to
-- do, or what the schedule's on_interrupt says). A run that was being aborted (timeout, cancel, a newer
-- fire) ends as that abort would have ended it. Returns how many runs moved.
CREATE OR REPLACE FUNCTION agentlab_sched.detect_suspended(now timestamptz DEFAULT now(),
                                                           stalled_after interval DEFAULT agentlab_sched.policy_interval('stall_seconds'))
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    r agentlab_sched.runs;
    n integer := 0;
BEGIN
    FOR c IN SELECT x.id, x.job_id FROM agentlab_sched.runs x
             LEFT JOIN public.procrastinate_jobs j ON j.id = x.job_id
             LEFT JOIN public.procrastinate_workers w ON w.id = j.worker_id
             WHERE x.status = 'running'
               AND (j.id IS NULL
                    OR (j.status = 'doing' AND (w.id IS NULL OR w.last_heartbeat < now - stalled_after)))
    LOOP
        -- The job's lock first, then the run's; skip whatever someone else is handling.
        IF c.job_id IS NOT NULL THEN
            PERFORM 1 FROM public.procrastinate_jobs j WHERE j.id = c.job_id AND j.status = 'doing' FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
        END IF;
        SELECT * INTO r FROM agentlab_sched.runs x
        WHERE x.id = c.id AND x.status = 'running' AND x.job_id IS NOT DISTINCT FROM c.job_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        IF r.job_id IS NOT NULL AND (r.abort_reason IS NOT NULL AND r.abort_reason <> 'shutdown'
                                     OR EXISTS (SELECT 1 FROM public.procrastinate_jobs j
                                                WHERE j.id = r.job_id AND j.abort_requested)) THEN
            PERFORM public.procrastinate_finish_job_v1(r.job_id, 'aborted', false);  -- the job trigger ends the run
        ELSE
            -- Its worker is gone: what its schedule's on_interrupt says (suspended by default).
            PERFORM agentlab_sched.interrupt_run(r, r.job_id IS NOT NULL, now);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- One run past its deadline: the first call asks Procrastinate to abort its job (abort_reason =
-- 'timeout'; the job trigger ends the run timed_out when the job ends aborted); a later call, once
-- `abort_grace` has passed and the task still runs (a synchronous task that does not check
-- context.should_abort()), says so in the run's error. Returns what it did: 'aborted', 'ignoring_abort'
-- or NULL.
CREATE OR REPLACE FUNCTION agentlab_sched.time_out_run(run_id uuid, now timestamptz DEFAULT now(),
                                                       abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'))
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
BEGIN
    r := agentlab_sched.lock_run(run_id);
    IF r.status <> 'running' OR r.deadline_at IS NULL OR r.deadline_at > now THEN
        RETURN NULL;
    END IF;
    IF r.abort_reason IS NULL THEN
        UPDATE agentlab_sched.runs x
        SET abort_reason = 'timeout', abort_requested_at = now, error_code = 'run.timed_out', updated_at = now
        WHERE x.id = r.id;
        IF r.job_id IS NOT NULL THEN
            PERFORM public.procrastinate_cancel_job_v1(r.job_id, true, false);
        END IF;
        RETURN 'aborted';
    END IF;
    IF r.abort_reason = 'timeout' AND r.abort_requested_at + abort_grace <= now
       AND r.error_code IS DISTINCT FROM 'run.ignoring_abort' THEN
        UPDATE agentlab_sched.runs x
        SET error = agentlab_sched.msg('run.ignoring_abort', jsonb_build_object(
                'timeout', jsonb_build_object('duration', extract(epoch FROM r.timeout)),
                'late', jsonb_build_object('duration', extract(epoch FROM now - r.abort_requested_at)))),
            error_code = 'run.ignoring_abort', updated_at = now
        WHERE x.id = r.id;
        RETURN 'ignoring_abort';
    END IF;
    RETURN NULL;
END
$$;

-- Every running run past its deadline: time_out_run() each. Returns how many changed.
CREATE OR REPLACE FUNCTION agentlab_sched.enforce_timeouts(now timestamptz DEFAULT now(),
                                                           abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'))
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rid uuid;
    n integer := 0;
BEGIN
    FOR rid IN SELECT x.id FROM agentlab_sched.runs x
               WHERE x.deadline_at <= now AND agentlab_sched.run_is_active(x.status)
               ORDER BY x.deadline_at LOOP
        IF agentlab_sched.time_out_run(rid, now, abort_grace) IS NOT NULL THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;

-- ------------------------------------------------------------------------------------------------
-- Context and retention
-- ------------------------------------------------------------------------------------------------

-- The host says the state behind a persistent schedule's session is gone: a new session key, used by
-- its next runs. Returns the new key.
CREATE OR REPLACE FUNCTION agentlab_sched.reset_session(name text) RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s agentlab_sched.schedules;
    new_key text;
BEGIN
    SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM agentlab_sched.fail('schedule.not_found', 'name', jsonb_build_object('name', name));
    END IF;
    IF s.context <> 'persistent' THEN
        PERFORM agentlab_sched.fail('session.not_persistent', 'context', jsonb_build_object('name', name));
    END IF;
    new_key := 'agentlab_sched:' || s.id || ':' || gen_random_uuid();
    UPDATE agentlab_sched.schedules x SET session_key = new_key WHERE x.id = s.id;
    RETURN new_key;
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

-- Remove history older than `older_than` (at least a minute): finished runs (with their approvals and
-- notifications, and their Procrastinate jobs), the fires that launched them or launched nothing, and
-- fire requests carried out. Never the newest fire of a schedule (nor its run), never a run that has
-- not ended, never a run with a notification still to send. `batch` bounds the runs (and fires) of one
-- call. Returns the counts.
CREATE OR REPLACE FUNCTION agentlab_sched.prune(older_than interval, now timestamptz DEFAULT now(),
                                                batch integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cutoff timestamptz;
    victims uuid[];
    jobs bigint[];
    n_fires integer;
    n_runs integer;
    n_jobs integer;
    n_requests integer;
BEGIN
    IF older_than IS NULL OR older_than < interval '1 minute' THEN
        PERFORM agentlab_sched.fail('retention.too_short', 'older_than', jsonb_build_object(
            'field', jsonb_build_object('msg', 'run.field.older_than'),
            'seconds', extract(epoch FROM older_than)::bigint));
    END IF;
    cutoff := now - older_than;
    victims := ARRAY(
        SELECT r.id FROM agentlab_sched.runs r
        WHERE agentlab_sched.run_is_final(r.status) AND r.finished_at < cutoff
          AND NOT EXISTS (SELECT 1 FROM agentlab_sched.fires f
                          WHERE f.run_id = r.id
                            AND NOT EXISTS (SELECT 1 FROM agentlab_sched.fires n
                                            WHERE n.schedule_id = f.schedule_id AND n.id > f.id))
          AND NOT EXISTS (SELECT 1 FROM agentlab_sched.outbox o WHERE o.run_id = r.id AND o.status = 'pending')
        ORDER BY r.finished_at
        LIMIT batch);
    jobs := ARRAY(
        SELECT r.job_id FROM agentlab_sched.runs r WHERE r.id = ANY (victims) AND r.job_id IS NOT NULL
        UNION
        SELECT a.job_id FROM agentlab_sched.approvals a WHERE a.run_id = ANY (victims) AND a.job_id IS NOT NULL);

    DELETE FROM agentlab_sched.fires f
    WHERE f.id IN (
        SELECT f2.id FROM agentlab_sched.fires f2
        WHERE f2.created_at < cutoff
          AND (f2.run_id IS NULL OR f2.run_id = ANY (victims))
          AND EXISTS (SELECT 1 FROM agentlab_sched.fires n WHERE n.schedule_id = f2.schedule_id AND n.id > f2.id)
        ORDER BY f2.id
        LIMIT batch);
    GET DIAGNOSTICS n_fires = ROW_COUNT;

    DELETE FROM agentlab_sched.runs r WHERE r.id = ANY (victims);
    GET DIAGNOSTICS n_runs = ROW_COUNT;

    DELETE FROM public.procrastinate_jobs j
    WHERE j.id = ANY (jobs) AND j.status IN ('succeeded', 'failed', 'cancelled', 'aborted');
    GET DIAGNOSTICS n_jobs = ROW_COUNT;

    DELETE FROM agentlab_sched.fire_requests q WHERE q.done_at < cutoff;
    GET DIAGNOSTICS n_requests = ROW_COUNT;

    RETURN jsonb_build_object('fires', n_fires, 'runs', n_runs, 'jobs', n_jobs, 'requests', n_requests);
END
$$;

-- ------------------------------------------------------------------------------------------------
-- Run bookkeeping (a trigger beside the job trigger of 50_runs.sql)
-- ------------------------------------------------------------------------------------------------

-- BEFORE UPDATE OF status ON runs:
-- - an approved run whose new job starts enters its next segment (not at approval time: until it runs
--   again it still counts as awaiting approval, and its segment names the approval it waits on);
-- - a run queued or running again forgets an earlier abort request.
-- (A run whose job a stopping worker aborted is interrupted, not cancelled: settle_run in 50_runs.sql.)
CREATE OR REPLACE FUNCTION agentlab_sched.runs_lifecycle() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF OLD.status = 'awaiting_approval' AND NEW.status = 'running'
       AND EXISTS (SELECT 1 FROM agentlab_sched.approvals a
                   WHERE a.run_id = NEW.id AND a.segment = OLD.segment AND a.status = 'approved') THEN
        NEW.segment := OLD.segment + 1;
    END IF;
    IF agentlab_sched.run_is_active(NEW.status) AND NEW.status <> OLD.status THEN
        NEW.abort_reason := NULL;
        NEW.abort_requested_at := NULL;
        NEW.cancelled_by := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER runs_lifecycle
    BEFORE UPDATE OF status ON agentlab_sched.runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION agentlab_sched.runs_lifecycle();
