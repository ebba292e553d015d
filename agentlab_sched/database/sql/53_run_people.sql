-- The people side of runs: approve, reject, resume and abandon a suspended run (one, or all of a
-- schedule), cancel any run, reset a schedule's persistent session (agentlab_sched/runs/lifecycle.py,
-- the CLI's `runs` commands).
--
-- Every function that acts on a run locks the run's current job first and the run second, the order the
-- job trigger uses (50_runs.sql), so a request never deadlocks with a worker finishing the job. Requests
-- that cannot apply (approving twice, resuming a run that is not suspended, ...) raise with SQLSTATE 55000
-- and change nothing; unknown runs raise P0002. Functions that depend on the time take `now` (the
-- database clock by default) so tests drive the clock.

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
        error_code = 'run.rejected', error_term = CASE WHEN nullif(btrim(reject.comment), '') IS NULL
            THEN agentlab_sched.term('run.rejected_by', jsonb_build_object('by', who))
            ELSE agentlab_sched.term('run.rejected_by_saying', jsonb_build_object('by', who, 'comment', reject.comment)) END,
        updated_at = now()
    WHERE x.id = r.id;
    RETURN 'cancelled';
END
$$;

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
    SET status = 'queued', job_id = jid, error = NULL, error_code = NULL, error_term = NULL, abort_reason = NULL,
        abort_requested_at = NULL, finished_at = NULL, interrupts = 0, updated_at = now,
        acted_by_login = session_user, acted_at = pg_catalog.clock_timestamp()
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
        error_term = agentlab_sched.term('run.abandoned_by', jsonb_build_object('by', by)),
        deadline_at = NULL, updated_at = now, acted_by_login = session_user, acted_at = pg_catalog.clock_timestamp()
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
        sid := (agentlab_sched.find_schedule(name)).id;
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
        error_term = agentlab_sched.term('run.cancelled_by', jsonb_build_object('by', by)),
        updated_at = now, acted_by_login = session_user, acted_at = pg_catalog.clock_timestamp()
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
    s := agentlab_sched.find_schedule(name, 'update');
    IF s.context <> 'persistent' THEN
        PERFORM agentlab_sched.fail('session.not_persistent', 'context', jsonb_build_object('name', name));
    END IF;
    new_key := 'agentlab_sched:' || s.id || ':' || gen_random_uuid();
    UPDATE agentlab_sched.schedules x SET session_key = new_key WHERE x.id = s.id;
    RETURN new_key;
END
$$;
