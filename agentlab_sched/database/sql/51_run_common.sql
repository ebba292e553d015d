-- What the run lifecycle's functions share (docs/runs.md): finding and locking a run, the checks of a
-- decision, the pending approval, deferring a run's next job, and the trigger that keeps a run's segment
-- and abort request right when its status changes.
--
-- Every function that acts on a run locks the run's current job first and the run second, the order the
-- job trigger uses (50_runs.sql), so a request never deadlocks with a worker finishing the job. Requests
-- that cannot apply (approving twice, resuming a run that is not suspended, ...) raise with SQLSTATE 55000
-- and change nothing; unknown runs raise P0002. Functions that depend on the time take `now` (the
-- database clock by default) so tests drive the clock.

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
    RETURN (agentlab_sched.defer_jobs(ARRAY[ROW(coalesce(q, 'default'), r.task, coalesce(p, 0), l, NULL,
                                          r.inputs, NULL)::public.procrastinate_job_to_defer_v1]))[1];
END
$$;

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

-- A run's error in the reader's language (the session's agentlab_sched.locale): one the system wrote (a
-- term, {"msg": code, "params": ...}) rendered now; a task's own words (no term), and a term whose code
-- the catalogue does not know, read as recorded.
CREATE OR REPLACE FUNCTION agentlab_sched.run_error_text(recorded text, term jsonb) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN jsonb_typeof(term) = 'object'
             AND EXISTS (SELECT 1 FROM agentlab_sched.messages m WHERE m.code = term ->> 'msg')
            THEN agentlab_sched.msg_value(term, agentlab_sched.locale())
        ELSE recorded
    END
$$;

-- The parameters of a timed-out run's error: its timeout, a duration rendered in the reader's language.
CREATE OR REPLACE FUNCTION agentlab_sched.run_timeout_params(timeout interval) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('timeout', jsonb_build_object('duration', extract(epoch FROM timeout)))
$$;
