-- Claim and apply: the database half of a tick. Python evaluates cron and decides what a tick does
-- (agentlab_sched/core/planner.py, run by agentlab_sched/firing/tick.py); these functions claim the
-- schedules it handles and apply its plans, all in the caller's transaction: the set-based path for the
-- plain launches of a storm (apply_simple_plans), the others one by one through launch() (42_launch.sql).

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
        WHERE (SELECT agentlab_sched.check_public())  -- refused while schema public is unsafe (02_public.sql)
          AND s.replan IS NOT NULL AND (s.resolving_until IS NULL OR s.resolving_until <= claim_due.now)
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

-- Whether any of the runs `rids` has a job of another task or other inputs (apply_simple_plans pairs runs
-- with the jobs it deferred by the order of their ids, and proves it). Each run's job is looked up by key:
-- a plan kept from when procrastinate_jobs was near empty hashed a scan of every job, at every batch.
CREATE OR REPLACE FUNCTION agentlab_sched.runs_mispaired(rids uuid[]) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM agentlab_sched.runs r JOIN public.procrastinate_jobs j ON j.id = r.job_id
                   WHERE r.id = ANY (rids) AND (j.task_name <> r.task OR j.args <> r.inputs));
END
$$;

-- The simple plans of a batch, set-based: plans that only move next_run_at, and plans with exactly one
-- launch of a schedule that nothing can refuse or make special (task known, no overlap to check or the
-- `skip` policy with no open run, no run limit, isolated context, inputs that render, not yet in the
-- ledger, claim not stale). Same rows as launch() writes: the ledger rows, the runs, and the jobs in one
-- defer_jobs() call. `done` lists the positions (1-based) of the plans applied here.
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
    -- Read once for the batch, not task_registered() once a fire.
    v_known text[] := agentlab_sched.registered_tasks();
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
               -- (a sql command with placeholders is launch()'s to render: its values become SQL literals)
               CASE WHEN p.at IS NOT NULL AND NOT (s.task = agentlab_sched.sql_task_name() AND tv.vals IS NOT NULL)
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
                   AND s.task = ANY (v_known)
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
    FROM unnest(agentlab_sched.defer_jobs(ARRAY(
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
    IF agentlab_sched.runs_mispaired(v_rids) THEN
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
