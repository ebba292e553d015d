-- Manual and backfill requests (trigger(), backfill(); agentlab_sched/firing/requests.py): a request is
-- a row of fire_requests, carried out by a worker within a tick through launch() like every fire
-- (next_request, carry_out_request), or failed with a message code (fail_request).

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
    SELECT s.id, s.enabled INTO sid, on_now FROM agentlab_sched.find_schedule(trigger.name) s;
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
-- them. An unbounded or out-of-range range is refused here, and so is one that surely holds more due
-- times than the limit (due_times_surely_over, 22_cron_gap.sql); near the limit, or for a cron that
-- bound cannot read, the worker's exact count refuses it (the request fails with its reason). A paused
-- schedule can be backfilled (that is what a backfill is for: the time it was paused).
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
    expr text;
    rid bigint;
BEGIN
    SELECT s.id, s.timezone, s.cron INTO sid, tz, expr FROM agentlab_sched.find_schedule(backfill.name) s;
    PERFORM agentlab_sched.check_backfill_bound('from', "from", tz);
    PERFORM agentlab_sched.check_backfill_bound('to', "to", tz);
    IF "from" >= "to" THEN
        PERFORM agentlab_sched.fail('backfill.bad_range', 'from', jsonb_build_object(
            'start', agentlab_sched.local_time_text("from", tz), 'end', agentlab_sched.local_time_text("to", tz)));
    END IF;
    IF agentlab_sched.due_times_surely_over(expr, tz, "from", "to",
                                             agentlab_sched.size_limit('backfill_times')) THEN
        PERFORM agentlab_sched.fail('backfill.too_many', 'to', jsonb_build_object(
            'start', agentlab_sched.local_time_text("from", tz), 'end', agentlab_sched.local_time_text("to", tz),
            'limit', agentlab_sched.size_limit('backfill_times')));
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
    PERFORM agentlab_sched.check_public();  -- refused while schema public is unsafe (02_public.sql)
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
    PERFORM agentlab_sched.check_public();  -- refused while schema public is unsafe (02_public.sql)
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
    -- The due times and refusals are checked, not taken on trust (the caller may be any admin): a manual
    -- request fires at the instant it asked for; a backfill at most limit.backfill_times distinct times,
    -- ascending, inside its range, each a due time of the schedule's cron (23_cron_match.sql); a refusal
    -- is a resolver's (recorded only by a worker's login), with one of the codes a resolver gives, in the
    -- system's words (record_fire renders them).
    IF req.kind = 'manual' AND (coalesce(array_length(times, 1), 0) <> 1 OR times[1] IS DISTINCT FROM req.fire_at) THEN
        PERFORM agentlab_sched.fail('request.bad_times', 'times', jsonb_build_object('id', req.id));
    END IF;
    IF req.kind = 'backfill' THEN
        IF coalesce(array_length(times, 1), 0) > agentlab_sched.size_limit('backfill_times') THEN
            PERFORM agentlab_sched.fail('backfill.too_many', 'to', jsonb_build_object(
                'start', agentlab_sched.local_time_text(req.fire_at, s.timezone),
                'end', agentlab_sched.local_time_text(req.until, s.timezone),
                'limit', agentlab_sched.size_limit('backfill_times')));
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(times) WITH ORDINALITY AS t(at, k)
                   WHERE t.at IS NULL OR t.at < req.fire_at OR t.at > req.until
                      OR (t.k > 1 AND t.at <= times[t.k - 1]))
           OR agentlab_sched.cron_not_due(s.cron, s.timezone, s.dst_gap, s.dst_repeat, s.name, times) IS NOT NULL THEN
            PERFORM agentlab_sched.fail('request.bad_times', 'times', jsonb_build_object('id', req.id));
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(refusals) WHEN 'array' THEN refusals
                                                  ELSE '[]'::jsonb END) e
               WHERE jsonb_typeof(e) = 'object') THEN
        IF EXISTS (SELECT 1 FROM agentlab_sched.config c WHERE c.key = 'role.worker')
           AND NOT pg_catalog.pg_has_role(session_user, (SELECT c.value FROM agentlab_sched.config c
                                                         WHERE c.key = 'role.worker'), 'MEMBER') THEN
            PERFORM agentlab_sched.fail('request.refusal_not_allowed', 'refusals',
                                        jsonb_build_object('user', session_user::text));
        END IF;
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(refusals) e
                   WHERE jsonb_typeof(e) = 'object'
                     AND (e ->> 'reason_code' IS NULL
                          OR e ->> 'reason_code' NOT IN ('launch.refused', 'launch.resolver_timeout', 'launch.error'))) THEN
            PERFORM agentlab_sched.fail('request.refusal_not_allowed', 'refusals',
                                        jsonb_build_object('user', session_user::text));
        END IF;
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
                NULL, req.requested_by));
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
