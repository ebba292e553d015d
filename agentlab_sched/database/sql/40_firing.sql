-- The firing engine's database half: claim due schedules, and apply the plans the workers computed.
-- Python evaluates cron and decides what a tick does (agentlab_sched/planner.py); these functions
-- apply it: overlap checks under the schedule's row lock, rendering of inputs, ledger rows, runs and
-- their Procrastinate jobs, all in the caller's transaction. One implementation (launch) serves the
-- tick, trigger and backfill alike.

-- Schedules a tick must handle at `now`: ones whose next_run_at a worker must compute (replan), then due
-- ones, at most `batch` in all. Locked for the caller's transaction; rows another tick holds are skipped,
-- never waited for, and the next unlocked ones taken instead (SKIP LOCKED inside each LIMIT: a claim never
-- comes back empty while something due is free). Schedules a worker is resolving (leased until
-- resolving_until) are left alone. NO KEY UPDATE: inserting ledger rows, runs and requests of a schedule
-- (foreign keys) does not wait for a claim, nor a claim for them.
CREATE OR REPLACE FUNCTION agentlab_sched.claim_due(now timestamptz, batch integer)
RETURNS SETOF agentlab_sched.schedules
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH replans AS (
        SELECT s.* FROM agentlab_sched.schedules s
        WHERE s.replan IS NOT NULL AND (s.resolving_until IS NULL OR s.resolving_until <= claim_due.now)
        ORDER BY s.id
        LIMIT batch
        FOR NO KEY UPDATE SKIP LOCKED
    ), due AS (
        SELECT s.* FROM agentlab_sched.schedules s
        WHERE s.enabled AND s.next_run_at <= claim_due.now AND s.replan IS NULL
          AND (s.resolving_until IS NULL OR s.resolving_until <= claim_due.now)
        ORDER BY s.next_run_at
        LIMIT greatest(batch - (SELECT count(*) FROM replans), 0)
        FOR NO KEY UPDATE SKIP LOCKED
    )
    SELECT * FROM replans
    UNION ALL
    SELECT * FROM due
$$;

-- Schedules whose next_run_at a worker (or the Python API, after a change) must compute, optionally only
-- `ids`, locked for the caller's transaction.
CREATE OR REPLACE FUNCTION agentlab_sched.claim_replans(ids bigint[] DEFAULT NULL)
RETURNS SETOF agentlab_sched.schedules
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.* FROM agentlab_sched.schedules s
    WHERE s.replan IS NOT NULL AND (claim_replans.ids IS NULL OR s.id = ANY (claim_replans.ids))
    ORDER BY s.id
    FOR UPDATE
$$;

-- Store re-planned next_run_at values (bookkeeping): each schedule of `ids` moves to its `nexts`, unless it
-- was asked meanwhile to re-plan differently than `replans` says. How many moved.
CREATE OR REPLACE FUNCTION agentlab_sched.set_next_runs(ids bigint[], nexts timestamptz[], replans text[])
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    moved integer;
BEGIN
    UPDATE agentlab_sched.schedules s SET next_run_at = u.nxt, replan = NULL
    FROM unnest(ids, nexts, replans) AS u(sid, nxt, asked)
    WHERE s.id = u.sid AND s.replan = u.asked;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END
$$;

-- Schedules `ids` are being resolved (their resolvers run outside any transaction) until `until`: other
-- ticks skip them meanwhile (bookkeeping).
CREATE OR REPLACE FUNCTION agentlab_sched.lease_schedules(ids bigint[], until timestamptz) RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE agentlab_sched.schedules s SET resolving_until = lease_schedules.until
    WHERE s.id = ANY (lease_schedules.ids)
$$;

-- The values a template can use, for one fire: all computed in the schedule's time zone.
CREATE OR REPLACE FUNCTION agentlab_sched.template_values(fire_at timestamptz, tz text, name text, kind text)
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'schedule.fire_at', to_char(l, 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN off < interval '0' THEN '-' ELSE '+' END
            || to_char(abs(extract(epoch FROM off))::int / 3600, 'FM00') || ':'
            || to_char(abs(extract(epoch FROM off))::int % 3600 / 60, 'FM00'),
        'schedule.fire_at_utc', to_char(fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        'schedule.date', to_char(l, 'YYYY-MM-DD'),
        'schedule.time', to_char(l, 'HH24:MI'),
        'schedule.yesterday', to_char(l::date - 1, 'YYYY-MM-DD'),
        'schedule.tomorrow', to_char(l::date + 1, 'YYYY-MM-DD'),
        'schedule.week_start', to_char(date_trunc('week', l)::date, 'YYYY-MM-DD'),
        'schedule.last_week_start', to_char(date_trunc('week', l)::date - 7, 'YYYY-MM-DD'),
        'schedule.month_start', to_char(date_trunc('month', l)::date, 'YYYY-MM-DD'),
        'schedule.last_month_start', to_char((date_trunc('month', l) - interval '1 month')::date, 'YYYY-MM-DD'),
        'schedule.year', to_char(l, 'YYYY'),
        'schedule.timestamp', extract(epoch FROM fire_at)::bigint::text,
        'schedule.name', name,
        'schedule.timezone', tz,
        'schedule.kind', kind)
    FROM (SELECT fire_at AT TIME ZONE tz AS l, (fire_at AT TIME ZONE tz) - (fire_at AT TIME ZONE 'UTC') AS off) t
$$;

-- Render `{{ schedule.x }}` placeholders in every string of the template. A small, safe language:
-- names only, no expressions, no code. `vals` are the values (template_values); `leftover` is the first
-- placeholder that is not known (then `rendered` is NULL). One pass over the template: each placeholder
-- is replaced by its value, and a value is never read again, so a value that itself looks like a
-- placeholder (a schedule named "x {{ schedule.date }}") stays literal.
CREATE OR REPLACE FUNCTION agentlab_sched.render_with(template jsonb, vals jsonb, OUT rendered jsonb, OUT leftover text)
LANGUAGE plpgsql IMMUTABLE
-- Workers' sessions force custom plans (against a bad generic plan of Procrastinate's fetch query), which
-- would plan each expression below again on every call (4x slower); nothing here reads a table.
SET plan_cache_mode = auto
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    body text := template::text;
    pieces text[];
    found text[];
    result text;
    v text;
    i integer := 0;
BEGIN
    IF position('{{' IN body) = 0 THEN
        rendered := template;  -- the common case: nothing to render, no work
        RETURN;
    END IF;
    -- A string that is just {{ schedule.timestamp }} becomes the number (Procrastinate's periodic tasks
    -- take `timestamp: int`); the value is digits, so nothing in it is read as a placeholder again.
    IF vals ? 'schedule.timestamp' THEN
        body := regexp_replace(body, '"\{\{\s*schedule\.timestamp\s*\}\}"', vals ->> 'schedule.timestamp', 'g');
        IF position('{{' IN body) = 0 THEN
            rendered := body::jsonb;
            RETURN;
        END IF;
    END IF;
    pieces := regexp_split_to_array(body, '\{\{\s*[^}]*\}\}');
    result := pieces[1];
    FOR found IN SELECT regexp_matches(body, '(\{\{\s*([^}]*?)\s*\}\})', 'g') LOOP
        i := i + 1;
        v := vals ->> found[2];
        IF v IS NULL THEN
            leftover := found[1];
            RETURN;
        END IF;
        -- Values are JSON-escaped (without their quotes) since they land inside JSON strings.
        result := result || substr(to_jsonb(v)::text, 2, length(to_jsonb(v)::text) - 2) || pieces[i + 1];
    END LOOP;
    rendered := result::jsonb;
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.render_template(template jsonb, fire_at timestamptz, tz text, name text,
                                                          kind text, OUT rendered jsonb, OUT leftover text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.rendered, r.leftover
    FROM agentlab_sched.render_with(template, CASE WHEN position('{{' IN template::text) > 0
                                                   THEN agentlab_sched.template_values(fire_at, tz, name, kind)
                                              END) r
$$;

-- The same, refusing an unknown placeholder with its name.
CREATE OR REPLACE FUNCTION agentlab_sched.render_inputs(template jsonb, fire_at timestamptz, tz text,
                                                        name text DEFAULT '', kind text DEFAULT 'scheduled')
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    r := agentlab_sched.render_template(template, fire_at, tz, name, kind);
    IF r.leftover IS NOT NULL THEN
        PERFORM agentlab_sched.fail('inputs.unknown_placeholder', 'inputs', jsonb_build_object(
            'placeholder', r.leftover,
            'known', (SELECT jsonb_agg(key ORDER BY key)
                      FROM jsonb_object_keys(agentlab_sched.template_values(fire_at, tz, name, kind)) AS key)));
    END IF;
    RETURN r.rendered;
END
$$;

-- Check a template without firing (the same renderer, at an arbitrary instant).
CREATE OR REPLACE FUNCTION agentlab_sched.check_inputs(template jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM agentlab_sched.render_inputs(template, now(), 'UTC');
END
$$;

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
                             THEN agentlab_sched.msg('schedule.paused_after_failures', jsonb_build_object(
                                 'count', s.consecutive_failures + 1,
                                 'since', to_char(now AT TIME ZONE s.timezone, 'YYYY-MM-DD HH24:MI'),
                                 'timezone', s.timezone))
                             ELSE s.paused_reason END,
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
            rendered := agentlab_sched.render_inputs(coalesce(override, s.inputs), at, s.timezone, s.name, fire_kind);
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

    jid := (public.procrastinate_defer_jobs_v1(ARRAY[ROW(s.queue, s.task, s.priority, job_lock, NULL, rendered,
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
        UPDATE agentlab_sched.runs SET abort_reason = code, error = agentlab_sched.msg(code), error_code = code
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

-- Apply the plans of one tick batch (see planner.Plan.as_json). Simple plans (the common case: one
-- launch that nothing can refuse, or only a new next_run_at) are applied set-based, a few statements for
-- the whole batch (apply_simple_plans); the others one by one through launch(). With `isolate`, every plan
-- goes one by one, each in its own subtransaction, so that an unexpected error in one records a generic
-- failed_to_start and the others go on; the tick first tries without (cheaper), and only on an error
-- retries isolated.
CREATE OR REPLACE FUNCTION agentlab_sched.apply_plans(plans jsonb, now timestamptz, isolate boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p jsonb;
    simple jsonb := '[]'::jsonb;
    done integer[] := '{}';
    outcomes jsonb[] := '{}';  -- appended in place (a jsonb || jsonb per plan would copy the array each time)
    one jsonb;
BEGIN
    IF NOT isolate THEN
        SELECT a.outcomes, a.done INTO simple, done FROM agentlab_sched.apply_simple_plans(plans, now) a;
    END IF;
    FOR p IN SELECT e.value FROM jsonb_array_elements(plans) WITH ORDINALITY AS e(value, i)
             WHERE e.i <> ALL (done) LOOP
        IF isolate THEN
            BEGIN
                one := agentlab_sched.apply_plan(p, now);
            EXCEPTION
                WHEN serialization_failure OR deadlock_detected OR lock_not_available THEN
                    -- Transient: nothing of this plan is written and the schedule stays due, so the next
                    -- tick tries it again; never a failed fire.
                    one := jsonb_build_object('schedule_id', p -> 'schedule_id', 'retry', true,
                                              'fires', '[]'::jsonb, 'sqlstate', SQLSTATE);
                WHEN OTHERS THEN
                    one := agentlab_sched.apply_failed_plan(p, now, SQLSTATE, SQLERRM);
            END;
        ELSE
            one := agentlab_sched.apply_plan(p, now);
        END IF;
        outcomes := outcomes || one;
    END LOOP;
    RETURN simple || to_jsonb(outcomes);
END
$$;

-- The simple plans of a batch, set-based: plans that only move next_run_at, and plans with exactly one
-- launch of a schedule that nothing can refuse or make special (task known, no overlap to check or the
-- `skip` policy with no open run, no run limit, isolated context, inputs that render, not yet in the
-- ledger, claim not stale). Same rows as launch() writes: the ledger rows, the runs, and the jobs in one
-- procrastinate_defer_jobs_v1 call. `done` lists the positions (1-based) of the plans applied here.
-- The schedules are locked by the caller's claim, so nothing can change them between the checks and the
-- writes; any error aborts the batch and the tick retries it plan by plan.
CREATE OR REPLACE FUNCTION agentlab_sched.apply_simple_plans(plans jsonb, now timestamptz,
                                                             OUT outcomes jsonb, OUT done integer[])
LANGUAGE plpgsql
SET plan_cache_mode = auto  -- a few statements per batch: cached plans (and none for the templates' code)
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    moved integer;
    n integer;
    v_pos integer[];
    v_sids bigint[];
    v_claimed timestamptz[];
    v_nexts timestamptz[];
    v_ats timestamptz[];
    v_kinds text[];
    v_rendered jsonb[];
    v_rids uuid[];
    v_fids bigint[];
    v_jids bigint[];
BEGIN
    WITH p AS (
        SELECT e.i::integer AS i, (e.v ->> 'schedule_id')::bigint AS sid,
               (e.v ->> 'claimed_next_run_at')::timestamptz AS claimed, (e.v ->> 'next_run_at')::timestamptz AS nxt,
               e.v -> 'fires' AS fires, (e.v -> 'fires' -> 0 ->> 'fire_at')::timestamptz AS at,
               e.v -> 'fires' -> 0 ->> 'kind' AS kind
        FROM jsonb_array_elements(plans) WITH ORDINALITY AS e(v, i)
    ), tv AS (  -- template values, computed once per (fire time, time zone, kind), the name added per schedule
        SELECT d.at, d.timezone, d.kind, agentlab_sched.template_values(d.at, d.timezone, '', d.kind) AS vals
        FROM (SELECT DISTINCT p.at, s.timezone, p.kind FROM p JOIN agentlab_sched.schedules s ON s.id = p.sid
              WHERE p.at IS NOT NULL AND position('{{' IN s.inputs::text) > 0) d
    ), picked AS (
        SELECT p.i, p.sid, p.claimed, p.nxt, p.at, p.kind,
               CASE WHEN p.at IS NOT NULL
                    THEN (agentlab_sched.render_with(s.inputs, tv.vals || jsonb_build_object('schedule.name', s.name))
                         ).rendered
               END AS rendered
        FROM p JOIN agentlab_sched.schedules s ON s.id = p.sid
        LEFT JOIN tv ON tv.at = p.at AND tv.timezone = s.timezone AND tv.kind = p.kind
        WHERE s.next_run_at IS NOT DISTINCT FROM p.claimed
          AND ((jsonb_array_length(p.fires) = 0 AND s.remaining_runs IS DISTINCT FROM 0)  -- else apply_plan stops it
               OR (jsonb_array_length(p.fires) = 1 AND p.fires -> 0 ->> 'action' = 'launch'
                   AND s.remaining_runs IS NULL AND s.context = 'isolated'
                   AND s.overlap IN ('allow_all', 'buffer_all', 'skip')
                   AND agentlab_sched.task_registered(s.task)
                   AND (s.overlap <> 'skip' OR NOT EXISTS (
                           SELECT 1 FROM agentlab_sched.runs r
                           WHERE r.schedule_id = s.id
                             AND agentlab_sched.run_is_open(r.status)))
                   AND NOT EXISTS (SELECT 1 FROM agentlab_sched.fires f
                                   WHERE f.schedule_id = s.id AND f.fire_at = p.at AND f.kind = p.kind)))
    )
    SELECT array_agg(i ORDER BY i), array_agg(sid ORDER BY i), array_agg(claimed ORDER BY i),
           array_agg(nxt ORDER BY i), array_agg(at ORDER BY i), array_agg(kind ORDER BY i),
           array_agg(rendered ORDER BY i)
    INTO v_pos, v_sids, v_claimed, v_nexts, v_ats, v_kinds, v_rendered
    FROM picked WHERE at IS NULL OR rendered IS NOT NULL;  -- a template that fails to render: launch() says why
    done := coalesce(v_pos, '{}');
    n := coalesce(array_length(v_pos, 1), 0);
    IF n = 0 THEN
        outcomes := '[]'::jsonb;
        RETURN;
    END IF;

    -- The conditional advance (as apply_plan): checked above under the claim's row locks, so all move.
    UPDATE agentlab_sched.schedules s SET next_run_at = u.nxt, replan = NULL
    FROM unnest(v_sids, v_claimed, v_nexts) AS u(sid, claimed, nxt)
    WHERE s.id = u.sid AND s.next_run_at IS NOT DISTINCT FROM u.claimed;
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF moved <> n THEN
        RAISE EXCEPTION 'apply_simple_plans: % of % schedules advanced', moved, n;
    END IF;

    -- Launches: ledger rows, jobs (one call), runs. No ON CONFLICT: a fire recorded meanwhile is an error,
    -- and the tick's isolated retry then reports it as a duplicate.
    SELECT array_agg(CASE WHEN u.at IS NOT NULL THEN gen_random_uuid() END ORDER BY u.k) INTO v_rids
    FROM unnest(v_ats) WITH ORDINALITY AS u(at, k);
    WITH ins AS (
        INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, inputs, run_id)
        SELECT u.sid, u.at, u.kind, 'started', u.rendered, u.rid
        FROM unnest(v_sids, v_ats, v_kinds, v_rendered, v_rids) WITH ORDINALITY AS u(sid, at, kind, rendered, rid, k)
        WHERE u.at IS NOT NULL
        ORDER BY u.k
        RETURNING id, run_id
    )
    SELECT array_agg(ins.id ORDER BY u.k) INTO v_fids
    FROM unnest(v_rids) WITH ORDINALITY AS u(rid, k) LEFT JOIN ins ON ins.run_id = u.rid;

    -- Job ids come from a sequence, in the order the jobs are inserted (the order of the array).
    SELECT array_agg(j ORDER BY j) INTO v_jids
    FROM unnest(public.procrastinate_defer_jobs_v1(ARRAY(
        SELECT ROW(s.queue, s.task, s.priority,
                   CASE WHEN s.overlap = 'buffer_all' THEN 'agentlab_sched:' || s.id END, NULL,
                   u.rendered, NULL)::public.procrastinate_job_to_defer_v1
        FROM unnest(v_sids, v_ats, v_rendered) WITH ORDINALITY AS u(sid, at, rendered, k)
        JOIN agentlab_sched.schedules s ON s.id = u.sid
        WHERE u.at IS NOT NULL
        ORDER BY u.k))) AS j;

    INSERT INTO agentlab_sched.runs (id, schedule_id, fire_id, task, inputs, status, job_id, started_by, timeout,
                                     session_key)
    SELECT l.rid, s.id, l.fid, s.task, l.rendered, 'queued', v_jids[l.rank], 'schedule:' || s.name, s.timeout,
           gen_random_uuid()::text
    FROM (SELECT u.*, row_number() OVER (ORDER BY u.k) AS rank
          FROM unnest(v_sids, v_rendered, v_rids, v_fids) WITH ORDINALITY AS u(sid, rendered, rid, fid, k)
          WHERE u.rid IS NOT NULL) l
    JOIN agentlab_sched.schedules s ON s.id = l.sid;

    -- The pairing of runs and jobs rests on the sequence handing out ids in insertion order; prove it for
    -- this batch (a mismatch aborts it, and the tick applies the batch again plan by plan).
    IF EXISTS (SELECT 1 FROM agentlab_sched.runs r JOIN public.procrastinate_jobs j ON j.id = r.job_id
               WHERE r.id = ANY (v_rids) AND (j.task_name <> r.task OR j.args <> r.inputs)) THEN
        RAISE EXCEPTION 'apply_simple_plans: runs and jobs paired out of order';
    END IF;

    SELECT jsonb_agg(jsonb_build_object(
               'schedule_id', l.sid,
               'fires', CASE WHEN l.rid IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(jsonb_build_object(
                   'fire_id', l.fid, 'status', 'started', 'run_id', l.rid,
                   'job_id', v_jids[l.rank])) END) ORDER BY l.k)
    INTO outcomes
    FROM (SELECT u.*, CASE WHEN u.rid IS NOT NULL THEN count(u.rid) OVER (ORDER BY u.k) END AS rank
          FROM unnest(v_sids, v_rids, v_fids) WITH ORDINALITY AS u(sid, rid, fid, k)) l;
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.apply_plan(p jsonb, now timestamptz) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s agentlab_sched.schedules;
    f jsonb;
    results jsonb := '[]'::jsonb;
    sid bigint := (p ->> 'schedule_id')::bigint;
    nxt timestamptz := (p ->> 'next_run_at')::timestamptz;
    advanced integer;
    one jsonb;
    err_state text;
    err_text text;
BEGIN
    -- The conditional advance: only the tick that claimed this pending due time moves it on.
    UPDATE agentlab_sched.schedules
    SET next_run_at = nxt, replan = NULL
    WHERE id = sid AND next_run_at IS NOT DISTINCT FROM (p ->> 'claimed_next_run_at')::timestamptz
    RETURNING * INTO s;
    GET DIAGNOSTICS advanced = ROW_COUNT;
    IF advanced = 0 THEN
        RETURN jsonb_build_object('schedule_id', sid, 'stale', true, 'fires', results);
    END IF;
    FOR f IN SELECT value FROM jsonb_array_elements(p -> 'fires') LOOP
        IF f ->> 'action' = 'launch' THEN
            -- Each launch in a subtransaction of its own: one that fails is recorded against its own fire
            -- (failed_to_start, launch.error) and the plan's other rows stay. A transient error (a
            -- serialization failure, a deadlock, a lock taken with NOWAIT) is not a failed fire: it aborts
            -- the plan, which is tried again.
            BEGIN
                one := agentlab_sched.launch(s, (f ->> 'fire_at')::timestamptz, f ->> 'kind');
            EXCEPTION
                WHEN serialization_failure OR deadlock_detected OR lock_not_available THEN
                    RAISE;
                WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE, err_text = MESSAGE_TEXT;
                    one := jsonb_build_object(
                        'status', 'failed_to_start',
                        'fire_id', agentlab_sched.record_fire(sid, (f ->> 'fire_at')::timestamptz, f ->> 'kind',
                                                              'failed_to_start', 'launch.error', '{}'::jsonb, NULL),
                        'error', jsonb_build_object('sqlstate', err_state, 'message', err_text));
            END;
            results := results || one;
            SELECT * INTO s FROM agentlab_sched.schedules WHERE id = sid;  -- remaining_runs may have moved
        ELSE
            results := results || jsonb_build_object(
                'status', CASE WHEN f ->> 'action' = 'fail' THEN 'failed_to_start' ELSE 'skipped_misfire' END,
                'fire_id', agentlab_sched.record_fire(
                    sid, (f ->> 'fire_at')::timestamptz, f ->> 'kind',
                    CASE WHEN f ->> 'action' = 'fail' THEN 'failed_to_start' ELSE 'skipped_misfire' END,
                    f ->> 'reason_code', f -> 'reason_params', f ->> 'reason'));
        END IF;
    END LOOP;
    -- A run limit reached: the schedule stops here.
    UPDATE agentlab_sched.schedules SET next_run_at = NULL
    WHERE id = sid AND remaining_runs = 0 AND next_run_at IS NOT NULL;
    RETURN jsonb_build_object('schedule_id', sid, 'fires', results);
END
$$;

-- An unexpected error while applying one plan: record a generic refusal for its first fire and move the
-- schedule on as planned, so one broken schedule never blocks the others or fires in a loop.
CREATE OR REPLACE FUNCTION agentlab_sched.apply_failed_plan(p jsonb, now timestamptz, state text, message text)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sid bigint := (p ->> 'schedule_id')::bigint;
    f jsonb := p -> 'fires' -> 0;
    fid bigint;
BEGIN
    UPDATE agentlab_sched.schedules SET next_run_at = (p ->> 'next_run_at')::timestamptz, replan = NULL
    WHERE id = sid AND next_run_at IS NOT DISTINCT FROM (p ->> 'claimed_next_run_at')::timestamptz;
    IF f IS NOT NULL THEN
        fid := agentlab_sched.record_fire(sid, (f ->> 'fire_at')::timestamptz, f ->> 'kind', 'failed_to_start',
                                          'launch.error', '{}'::jsonb, NULL);
    END IF;
    RETURN jsonb_build_object('schedule_id', sid, 'error', jsonb_build_object('sqlstate', state, 'message', message),
                              'fires', jsonb_build_array(jsonb_build_object('status', 'failed_to_start',
                                                                            'fire_id', fid)));
END
$$;

-- Apply the plans of schedules whose resolvers ran outside any transaction (the tick leased them, see
-- claim_due): each is locked again, and applied only if it is still as claimed (the same next_run_at and
-- version: not paused, altered or fired by another worker meanwhile); the others are reported stale and
-- left as they are. The lease ends either way.
CREATE OR REPLACE FUNCTION agentlab_sched.apply_resolved(plans jsonb, now timestamptz, isolate boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ids bigint[];
    current jsonb;
    stale jsonb;
BEGIN
    SELECT coalesce(array_agg((e ->> 'schedule_id')::bigint ORDER BY (e ->> 'schedule_id')::bigint), '{}')
    INTO ids FROM jsonb_array_elements(plans) e;
    PERFORM 1 FROM agentlab_sched.schedules s WHERE s.id = ANY (ids) ORDER BY s.id FOR NO KEY UPDATE;
    SELECT coalesce(jsonb_agg(e) FILTER (WHERE ok), '[]'::jsonb),
           coalesce(jsonb_agg(jsonb_build_object('schedule_id', e -> 'schedule_id', 'stale', true,
                                                 'fires', '[]'::jsonb)) FILTER (WHERE NOT ok), '[]'::jsonb)
    INTO current, stale
    FROM (SELECT e, coalesce(s.next_run_at IS NOT DISTINCT FROM (e ->> 'claimed_next_run_at')::timestamptz
                             AND s.version = (e ->> 'claimed_version')::integer, false) AS ok
          FROM jsonb_array_elements(plans) e
          LEFT JOIN agentlab_sched.schedules s ON s.id = (e ->> 'schedule_id')::bigint) c;
    UPDATE agentlab_sched.schedules SET resolving_until = NULL WHERE id = ANY (ids) AND resolving_until IS NOT NULL;
    RETURN stale || agentlab_sched.apply_plans(current, now, isolate);
END
$$;

-- Whether a live worker has registered `task` within the known-task window (limits.py's
-- known_task_seconds): launch() refuses a fire of a task nobody runs, the set-based launch leaves it to
-- launch(). Saving a schedule for a task that is not registered warns; doctor lists them.
CREATE OR REPLACE FUNCTION agentlab_sched.task_registered(task text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM agentlab_sched.known_tasks k
                   WHERE k.task = task_registered.task
                     AND k.seen_at > clock_timestamp() - agentlab_sched.policy_interval('known_task_seconds'))
$$;

-- Register the tasks a live worker can run (a fire for a task nobody runs is refused, not queued).
CREATE OR REPLACE FUNCTION agentlab_sched.register_tasks(names text[]) RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO agentlab_sched.known_tasks (task, seen_at)
    SELECT DISTINCT unnest(names), clock_timestamp()
    ON CONFLICT (task) DO UPDATE SET seen_at = excluded.seen_at
$$;

-- Ask for a manual fire now; a worker carries it out within a tick through the same rules as every fire.
-- The id names the request; fire_history shows the outcome. Each request gets an instant of its own
-- (fire_at, to the microsecond; one taken already moves it on by a microsecond), so requests made at once
-- never collapse onto one ledger row. A paused schedule is refused unless `even_if_paused`.
CREATE OR REPLACE FUNCTION agentlab_sched.trigger(name text, inputs jsonb DEFAULT NULL,
                                                  even_if_paused boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sid bigint;
    on_now boolean;
    rid bigint;
    at timestamptz := clock_timestamp();
    tries integer := 0;
BEGIN
    SELECT s.id, s.enabled INTO sid, on_now FROM agentlab_sched.schedules s WHERE s.name = trigger.name;
    IF sid IS NULL THEN
        PERFORM agentlab_sched.fail('schedule.not_found', 'name', jsonb_build_object('name', trigger.name));
    END IF;
    IF NOT on_now AND NOT coalesce(even_if_paused, false) THEN
        PERFORM agentlab_sched.fail('trigger.paused', 'name', jsonb_build_object('name', trigger.name));
    END IF;
    IF inputs IS NOT NULL AND jsonb_typeof(inputs) <> 'object' THEN
        PERFORM agentlab_sched.fail('schedule.not_object', 'inputs', jsonb_build_object(
            'field', agentlab_sched.field_term('inputs'),
            'type', jsonb_build_object('msg', 'schedule.json.' || jsonb_typeof(inputs))));
    END IF;
    IF inputs IS NOT NULL THEN
        PERFORM agentlab_sched.check_size('inputs', inputs, 'trigger_inputs_bytes');
        PERFORM agentlab_sched.check_inputs(inputs);
        -- Other inputs for a built-in task are checked as its own would be (who may run SQL as whom).
        PERFORM agentlab_sched.check_task_inputs(
            (SELECT s.task FROM agentlab_sched.schedules s WHERE s.id = sid), inputs);
    END IF;
    -- Bounded: an instant taken moves it on by a microsecond, but a trigger of the operator's on the requests
    -- table that pins fire_at would make every attempt collide, and the loop would never end.
    LOOP
        tries := tries + 1;
        IF tries > 1000 THEN
            PERFORM agentlab_sched.fail('trigger.no_free_instant', 'name',
                                        jsonb_build_object('name', trigger.name, 'tries', tries - 1));
        END IF;
        IF NOT EXISTS (SELECT 1 FROM agentlab_sched.fires f
                       WHERE f.schedule_id = sid AND f.fire_at = at AND f.kind = 'manual') THEN
            INSERT INTO agentlab_sched.fire_requests (schedule_id, kind, fire_at, inputs, requested_by, even_if_paused)
            VALUES (sid, 'manual', at, inputs, 'manual:' || session_user, coalesce(even_if_paused, false))
            ON CONFLICT (schedule_id, fire_at) WHERE kind = 'manual' DO NOTHING
            RETURNING id INTO rid;
            EXIT WHEN rid IS NOT NULL;
        END IF;
        at := at + interval '1 microsecond';
    END LOOP;
    PERFORM pg_notify('agentlab_sched_schedules', sid::text);
    RETURN rid;
END
$$;

-- Fire schedule `name` now with the inputs it has (trigger() without inputs): a privilege of its own, so
-- that someone may fire a schedule without being able to run its task with other inputs.
CREATE OR REPLACE FUNCTION agentlab_sched.trigger_now(name text, even_if_paused boolean DEFAULT false)
RETURNS bigint
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT agentlab_sched.trigger(trigger_now.name, NULL::jsonb, trigger_now.even_if_paused)
$$;

-- Who asked for request `request_id` as the caller calls itself (the CLI's user name, a script's name):
-- kept beside the login role the request recorded ("manual:alice (ops)"). Only for a request this login
-- made and that is not carried out yet.
CREATE OR REPLACE FUNCTION agentlab_sched.label_request(request_id bigint, label text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    said text := regexp_replace(coalesce(label, ''), '^(manual|backfill):', '');
BEGIN
    IF btrim(said) = '' THEN
        RETURN;
    END IF;
    PERFORM agentlab_sched.validate_text('requested_by', said, 200);
    UPDATE agentlab_sched.fire_requests r
    SET requested_by = r.kind || ':' || agentlab_sched.decider(said)
    WHERE r.id = label_request.request_id AND r.done_at IS NULL AND r.requested_by = r.kind || ':' || session_user;
END
$$;

-- The instants a backfill may name: finite, and far enough from the ends of the calendar that the cron
-- evaluator can step past them.
CREATE OR REPLACE FUNCTION agentlab_sched.check_backfill_bound(field text, at timestamptz, tz text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lowest constant timestamptz := '1900-01-01 00:00:00+00';
    highest constant timestamptz := '9000-01-01 00:00:00+00';
BEGIN
    IF at IS NULL THEN
        PERFORM agentlab_sched.fail('schedule.required', field, jsonb_build_object('field', agentlab_sched.field_term(field)));
    END IF;
    IF NOT isfinite(at) OR at < lowest OR at >= highest THEN
        PERFORM agentlab_sched.fail('backfill.out_of_range', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field),
            'value', CASE WHEN isfinite(at) THEN agentlab_sched.local_time_text(at, tz) ELSE at::text END,
            'min', agentlab_sched.local_time_text(lowest, 'UTC'),
            'max', agentlab_sched.local_time_text(highest, 'UTC')));
    END IF;
END
$$;

-- Ask for one backfill fire per due time in [from, to], under the request's own overlap policy
-- (buffer_all by default: the fires run one after another, none dropped); a worker expands and fires
-- them. An unbounded or out-of-range range is refused here; one with more due times than the limit is
-- refused by the worker (the request fails with its reason). A paused schedule can be backfilled (that
-- is what a backfill is for: the time it was paused).
CREATE OR REPLACE FUNCTION agentlab_sched.backfill(name text, "from" timestamptz, "to" timestamptz,
                                                   overlap text DEFAULT 'buffer_all')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sid bigint;
    tz text;
    rid bigint;
BEGIN
    SELECT s.id, s.timezone INTO sid, tz FROM agentlab_sched.schedules s WHERE s.name = backfill.name;
    IF sid IS NULL THEN
        PERFORM agentlab_sched.fail('schedule.not_found', 'name', jsonb_build_object('name', backfill.name));
    END IF;
    PERFORM agentlab_sched.check_backfill_bound('from', "from", tz);
    PERFORM agentlab_sched.check_backfill_bound('to', "to", tz);
    IF "from" >= "to" THEN
        PERFORM agentlab_sched.fail('backfill.bad_range', 'from', jsonb_build_object(
            'start', agentlab_sched.local_time_text("from", tz), 'end', agentlab_sched.local_time_text("to", tz)));
    END IF;
    PERFORM agentlab_sched.validate_choice('overlap', overlap,
                                           ARRAY['skip', 'buffer_one', 'buffer_all', 'allow_all', 'cancel_other']);
    INSERT INTO agentlab_sched.fire_requests (schedule_id, kind, fire_at, until, requested_by, overlap)
    VALUES (sid, 'backfill', "from", "to", 'backfill:' || session_user, overlap)
    RETURNING id INTO rid;
    PERFORM pg_notify('agentlab_sched_schedules', sid::text);
    RETURN rid;
END
$$;

-- The next pending request to carry out (or request `request_id`), locked for the caller's transaction;
-- requests another worker holds are skipped, and so are the ids in `skip` (left for a later tick). A
-- backfill whose range no backfill can cover (written around backfill()'s checks) fails here, with its
-- reason, before any worker tries to read it.
CREATE OR REPLACE FUNCTION agentlab_sched.next_request(request_id bigint DEFAULT NULL, skip bigint[] DEFAULT '{}')
RETURNS TABLE (id bigint, kind text, fire_at timestamptz, until timestamptz, inputs jsonb, overlap text,
               schedule jsonb)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r agentlab_sched.fire_requests;
    tz text;
    detail jsonb;
BEGIN
    LOOP
        SELECT q.* INTO r FROM agentlab_sched.fire_requests q
        WHERE q.done_at IS NULL AND (next_request.request_id IS NULL OR q.id = next_request.request_id)
          AND q.id <> ALL (coalesce(skip, '{}'))
        ORDER BY q.id
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        IF r.kind = 'backfill' THEN
            SELECT s.timezone INTO tz FROM agentlab_sched.schedules s WHERE s.id = r.schedule_id;
            BEGIN
                PERFORM agentlab_sched.check_backfill_bound('from', r.fire_at, tz);
                PERFORM agentlab_sched.check_backfill_bound('to', r.until, tz);
            EXCEPTION WHEN invalid_parameter_value THEN
                GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
                PERFORM agentlab_sched.fail_request(r.id, detail ->> 'code', detail -> 'params');
                CONTINUE;
            END;
        END IF;
        RETURN QUERY SELECT r.id, r.kind, r.fire_at, r.until, r.inputs, r.overlap, to_jsonb(s)
                     FROM agentlab_sched.schedules s WHERE s.id = r.schedule_id;
        RETURN;
    END LOOP;
END
$$;

-- A request that cannot be carried out: done, with its reason (code and parameters, and the words in the
-- session's locale). It is never retried.
CREATE OR REPLACE FUNCTION agentlab_sched.fail_request(request_id bigint, code text, params jsonb DEFAULT '{}')
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE agentlab_sched.fire_requests
    SET done_at = clock_timestamp(), error_code = code, error_params = coalesce(params, '{}'::jsonb),
        error = agentlab_sched.msg(code, coalesce(params, '{}'::jsonb)), fire_ids = coalesce(fire_ids, '{}'),
        outcome = coalesce(outcome, '{}'::jsonb)
    WHERE id = request_id AND done_at IS NULL;
    RETURN jsonb_build_object('request_id', request_id, 'fires', '[]'::jsonb, 'outcome', '{}'::jsonb,
                              'error', jsonb_build_object('code', code, 'params', coalesce(params, '{}'::jsonb),
                                                          'message', agentlab_sched.msg(code, params)));
END
$$;

-- Carry out one fire request (manual or backfill) at the due times the worker computed: each time goes
-- through launch() under the schedule's row lock (with `wait` false, a schedule locked by someone else
-- raises lock_not_available at once and the request stays pending), and the request is marked done with
-- the fires it wrote and their count by status. `refusals` holds, per time (same position), NULL or the
-- resolver's refusal {reason_code, reason_params, reason}. A backfill follows the request's overlap
-- policy; a manual request whose schedule was paused meanwhile fails, unless it said even_if_paused.
CREATE OR REPLACE FUNCTION agentlab_sched.carry_out_request(request_id bigint, times timestamptz[],
                                                            refusals jsonb DEFAULT '[]'::jsonb,
                                                            wait boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    req agentlab_sched.fire_requests;
    s agentlab_sched.schedules;
    no jsonb;
    one jsonb;
    results jsonb := '[]'::jsonb;
    ids bigint[] := '{}';
    counts jsonb;
    paused boolean;
    problem text;
BEGIN
    SELECT * INTO req FROM agentlab_sched.fire_requests WHERE id = request_id AND done_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- NO KEY UPDATE: the lock a tick's claim conflicts with, but not the key-share locks that inserting
    -- requests, fires and runs of this schedule take (two triggers at once would deadlock on those).
    IF wait THEN
        SELECT * INTO s FROM agentlab_sched.schedules WHERE id = req.schedule_id FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO s FROM agentlab_sched.schedules WHERE id = req.schedule_id FOR NO KEY UPDATE NOWAIT;
    END IF;
    paused := NOT s.enabled;
    IF paused AND req.kind = 'manual' AND NOT req.even_if_paused THEN
        RETURN agentlab_sched.fail_request(request_id, 'trigger.paused', jsonb_build_object('name', s.name));
    END IF;
    -- The request's own inputs are checked now, against the task this launches (the schedule's may have
    -- changed since the request), with the privileges of the login that asked (32_sql_task.sql).
    IF req.inputs IS NOT NULL THEN
        BEGIN
            PERFORM agentlab_sched.check_task_inputs(s.task, req.inputs, req.requested_login);
        EXCEPTION WHEN invalid_parameter_value OR insufficient_privilege THEN
            GET STACKED DIAGNOSTICS problem = PG_EXCEPTION_DETAIL;
            RETURN agentlab_sched.fail_request(request_id, problem::jsonb ->> 'code', problem::jsonb -> 'params');
        END;
    END IF;
    FOR i IN 1 .. coalesce(array_length(times, 1), 0) LOOP
        IF i > 1 THEN
            SELECT * INTO s FROM agentlab_sched.schedules WHERE id = req.schedule_id;  -- session_key may have moved
        END IF;
        IF req.overlap IS NOT NULL THEN
            s.overlap := req.overlap;
        END IF;
        no := refusals -> (i - 1);
        IF no IS NOT NULL AND jsonb_typeof(no) = 'object' THEN
            one := jsonb_build_object('status', 'failed_to_start', 'fire_at', times[i],
                                      'reason_code', no ->> 'reason_code', 'fire_id', agentlab_sched.record_fire(
                s.id, times[i], req.kind, 'failed_to_start', no ->> 'reason_code', no -> 'reason_params',
                no ->> 'reason', req.requested_by));
            IF one ->> 'fire_id' IS NULL THEN
                one := jsonb_build_object('status', 'duplicate', 'fire_at', times[i]);
            END IF;
        ELSE
            one := agentlab_sched.launch(s, times[i], req.kind, req.inputs, req.requested_by)
                   || jsonb_build_object('fire_at', times[i]);
        END IF;
        IF req.kind = 'manual' AND one ->> 'status' = 'duplicate' THEN
            RETURN agentlab_sched.fail_request(request_id, 'request.duplicate', jsonb_build_object(
                'at', agentlab_sched.local_time_text(times[i], s.timezone), 'timezone', s.timezone));
        END IF;
        results := results || one;
        IF one ->> 'fire_id' IS NOT NULL THEN
            ids := ids || (one ->> 'fire_id')::bigint;
        END IF;
    END LOOP;
    UPDATE agentlab_sched.fires SET request_id = req.id WHERE id = ANY (ids);
    SELECT coalesce(jsonb_object_agg(st, n), '{}'::jsonb) INTO counts
    FROM (SELECT e ->> 'status' AS st, count(*) AS n FROM jsonb_array_elements(results) e GROUP BY 1) c;
    UPDATE agentlab_sched.fire_requests SET done_at = clock_timestamp(), fire_ids = ids, outcome = counts
    WHERE id = request_id;
    RETURN jsonb_build_object('request_id', request_id, 'fires', results, 'outcome', counts, 'paused', paused,
                              'error', NULL);
END
$$;
