-- Many schedules in one call: schedule_many(definitions jsonb), a JSON array of objects whose keys are
-- schedule()'s argument names. All validated, all or nothing; a refusal names the definition (its place
-- in the array, from 1, and its name) and the field, with the words schedule() would use.
--
-- A million definitions in one statement: the per-row validation trigger (plpgsql, tens of checks per
-- row) would take about 2 ms a row, so the checks are made set-based here instead: the shape of every
-- row at once, the checks that differ row by row (name, casts) as one pass, and validate_schedule() once
-- per distinct definition apart from its name (a million per-tenant schedules share a handful). The
-- insert then runs with a bulk mark in bookkeeping_marks, which only the owner can write, telling the
-- triggers the rows were validated: no second validation, the audit rows written set-based and one
-- NOTIFY instead of a million.

-- The arguments of schedule() a definition may give (the others take their defaults).
CREATE OR REPLACE FUNCTION agentlab_sched.bulk_fields() RETURNS text[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY['name', 'cron', 'task', 'inputs', 'timezone', 'queue', 'priority', 'overlap', 'misfire_grace',
                 'timeout', 'enabled', 'catchup', 'max_catchup', 'starts_at', 'ends_at', 'remaining_runs',
                 'pause_after_failures', 'context', 'dst_gap', 'dst_repeat', 'on_interrupt']
$$;

-- The row a definition makes (`base`: the defaults), with the checks that differ from row to row: the
-- values' types, the name, the arguments schedule() requires.
CREATE OR REPLACE FUNCTION agentlab_sched._bulk_row(base agentlab_sched.schedules, e jsonb)
RETURNS agentlab_sched.schedules
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.schedules;
    k text;
BEGIN
    FOREACH k IN ARRAY ARRAY['name', 'cron', 'task'] LOOP
        IF e -> k IS NULL OR jsonb_typeof(e -> k) = 'null' THEN
            PERFORM agentlab_sched.validate_text(k, NULL, 0);
        END IF;
    END LOOP;
    e := jsonb_strip_nulls(e);  -- null is "not given", as in schedule(): the default
    BEGIN
        r := jsonb_populate_record(base, e);
    EXCEPTION WHEN data_exception THEN
        -- Which value: the first whose own cast fails.
        FOREACH k IN ARRAY agentlab_sched.bulk_fields() LOOP
            IF e ? k THEN
                BEGIN
                    PERFORM jsonb_populate_record(base, jsonb_build_object(k, e -> k));
                EXCEPTION WHEN data_exception THEN
                    PERFORM agentlab_sched.fail('schedule.bulk_bad_value', k, jsonb_build_object(
                        'key', k, 'value', left(e ->> k, 100), 'reason', SQLERRM));
                END;
            END IF;
        END LOOP;
        RAISE;
    END;
    PERFORM agentlab_sched.validate_text('name', r.name, 200);
    RETURN r;
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.schedule_many(definitions jsonb) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    base agentlab_sched.schedules := agentlab_sched.option_defaults();
    known text[] := agentlab_sched.bulk_fields();
    cur_row bigint;
    cur_name text;
    e jsonb;
    k text;
    other bigint;
    created bigint;
    detail jsonb;
    err_detail text;
    err_field text;
BEGIN
    IF jsonb_typeof(definitions) IS DISTINCT FROM 'array' THEN
        PERFORM agentlab_sched.fail('schedule.bulk_not_array', 'definitions', jsonb_build_object(
            'type', jsonb_build_object('msg', 'schedule.json.' || coalesce(jsonb_typeof(definitions), 'null'))));
    END IF;
    -- The columns' own defaults where validation reads them (the insert leaves them to the table).
    base.timezone := 'UTC';
    base.inputs := '{}'::jsonb;
    base.webhook_events := ARRAY['finished', 'failed'];
    base.consecutive_failures := 0;
    base.failure_epoch := 0;
    base.version := 1;
    BEGIN
        -- The shape: objects, with known keys only.
        SELECT t.ord, t.e INTO cur_row, e
        FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)
        WHERE jsonb_typeof(t.e) <> 'object' ORDER BY t.ord LIMIT 1;
        IF FOUND THEN
            PERFORM agentlab_sched.fail('schedule.bulk_not_object', NULL, jsonb_build_object(
                'type', jsonb_build_object('msg', 'schedule.json.' || jsonb_typeof(e))));
        END IF;
        SELECT t.ord, t.e ->> 'name', key INTO cur_row, cur_name, k
        FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord), jsonb_object_keys(t.e) AS key
        WHERE key <> ALL (known) ORDER BY t.ord LIMIT 1;
        IF FOUND THEN
            PERFORM agentlab_sched.fail('schedule.bulk_unknown_field', k, jsonb_build_object(
                'key', k, 'known', array_to_string(known, ', ')));
        END IF;
        cur_row := NULL;
        cur_name := NULL;
        -- Row by row (one set-based pass: the required arguments, the values' types, the names; on a
        -- refusal, again one by one through _bulk_row() to name the row and say what is wrong).
        BEGIN
            IF EXISTS (SELECT 1 FROM jsonb_array_elements(definitions) AS t(e)
                       WHERE coalesce(jsonb_typeof(t.e -> 'name'), 'null') = 'null'
                          OR coalesce(jsonb_typeof(t.e -> 'cron'), 'null') = 'null'
                          OR coalesce(jsonb_typeof(t.e -> 'task'), 'null') = 'null') THEN
                RAISE EXCEPTION 'a required argument is missing';  -- found and said below
            END IF;
            PERFORM agentlab_sched.validate_text('name', x.name, 200)
            FROM jsonb_array_elements(definitions) AS t(e),
                 jsonb_to_record(t.e) AS x(
                     name text, cron text, task text, inputs jsonb, timezone text, queue text,
                     priority integer, overlap text, misfire_grace interval, timeout interval,
                     enabled boolean, catchup text, max_catchup integer, starts_at timestamptz,
                     ends_at timestamptz, remaining_runs integer, pause_after_failures integer,
                     context text, dst_gap text, dst_repeat text, on_interrupt text);
        EXCEPTION WHEN OTHERS THEN
            FOR cur_row, e IN SELECT t.ord, t.e FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)
                              ORDER BY t.ord LOOP
                cur_name := e ->> 'name';
                PERFORM agentlab_sched._bulk_row(base, e);
            END LOOP;
            RAISE;
        END;
        -- Names given twice, names taken.
        SELECT d.ord, d.name, d.first INTO cur_row, cur_name, other
        FROM (SELECT t.ord, t.e ->> 'name' AS name,
                     min(t.ord) OVER (PARTITION BY t.e ->> 'name') AS first
              FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)) d
        WHERE d.ord <> d.first ORDER BY d.ord LIMIT 1;
        IF FOUND THEN
            PERFORM agentlab_sched.fail('schedule.bulk_duplicate', 'name', jsonb_build_object(
                'name', cur_name, 'first', other));
        END IF;
        SELECT t.ord, t.e ->> 'name' INTO cur_row, cur_name
        FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)
        JOIN agentlab_sched.schedules s ON s.name = t.e ->> 'name'
        ORDER BY t.ord LIMIT 1;
        IF FOUND THEN
            PERFORM agentlab_sched.fail('schedule.name_taken', 'name', jsonb_build_object('name', cur_name));
        END IF;
        -- Everything else, once per distinct definition apart from the name (the trigger's checks).
        FOR cur_row, e IN
            SELECT min(t.ord), (array_agg(t.e ORDER BY t.ord))[1]
            FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)
            GROUP BY t.e - 'name' ORDER BY 1
        LOOP
            cur_name := e ->> 'name';
            PERFORM agentlab_sched.validate_schedule(agentlab_sched._bulk_row(base, e), NULL);
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS err_detail = PG_EXCEPTION_DETAIL, err_field = COLUMN_NAME;
        IF cur_row IS NULL OR err_detail IS NULL OR left(err_detail, 1) <> '{' THEN
            RAISE;
        END IF;
        detail := err_detail::jsonb;
        PERFORM agentlab_sched.fail('schedule.bulk_row', detail ->> 'field', jsonb_build_object(
            'row', cur_row, 'name', coalesce(cur_name, ''),
            'problem', jsonb_build_object('msg', detail ->> 'code', 'params', detail -> 'params'),
            'code', detail ->> 'code'));
    END;
    -- Validated: insert under the bulk mark (the triggers skip what was done above).
    INSERT INTO agentlab_sched.bookkeeping_marks (schedule_id, kind) VALUES (0, 'bulk');
    WITH ins AS (
        INSERT INTO agentlab_sched.schedules AS s
            (name, cron, task, inputs, timezone, queue, priority, overlap, misfire_grace, timeout, enabled,
             catchup, max_catchup, starts_at, ends_at, remaining_runs, pause_after_failures, context, dst_gap,
             dst_repeat, on_interrupt)
        SELECT x.name, x.cron, x.task, coalesce(x.inputs, base.inputs), coalesce(x.timezone, base.timezone),
               coalesce(x.queue, base.queue), coalesce(x.priority, base.priority),
               coalesce(x.overlap, base.overlap), coalesce(x.misfire_grace, base.misfire_grace),
               coalesce(x.timeout, base.timeout), coalesce(x.enabled, base.enabled),
               coalesce(x.catchup, base.catchup), coalesce(x.max_catchup, base.max_catchup),
               coalesce(x.starts_at, base.starts_at), coalesce(x.ends_at, base.ends_at),
               coalesce(x.remaining_runs, base.remaining_runs),
               coalesce(x.pause_after_failures, base.pause_after_failures), coalesce(x.context, base.context),
               coalesce(x.dst_gap, base.dst_gap), coalesce(x.dst_repeat, base.dst_repeat),
               coalesce(x.on_interrupt, base.on_interrupt)
        FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord),
             jsonb_to_record(t.e) AS x(
                 name text, cron text, task text, inputs jsonb, timezone text, queue text, priority
                 integer, overlap text, misfire_grace interval, timeout interval, enabled boolean,
                 catchup text, max_catchup integer, starts_at timestamptz, ends_at timestamptz,
                 remaining_runs integer, pause_after_failures integer, context text, dst_gap text,
                 dst_repeat text, on_interrupt text)
        ORDER BY t.ord
        RETURNING s.*),
    audit AS (
        INSERT INTO agentlab_sched.schedule_changes
            (schedule_id, schedule_name, operation, db_role, application_name, old_values, new_values)
        SELECT ins.id, ins.name, 'insert', session_user, nullif(current_setting('application_name', true), ''),
               NULL, agentlab_sched.schedule_audit_values(ROW(ins.*)::agentlab_sched.schedules)
        FROM ins
        RETURNING 1)
    SELECT count(*) INTO created FROM audit;
    DELETE FROM agentlab_sched.bookkeeping_marks m
    WHERE m.xact = pg_current_xact_id() AND m.schedule_id = 0 AND m.kind = 'bulk';
    PERFORM pg_notify('agentlab_sched_schedules', '0');
    RETURN created;
END
$$;

-- Whether this transaction is inside schedule_many's insert (its rows validated already).
CREATE OR REPLACE FUNCTION agentlab_sched.in_bulk_insert() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM agentlab_sched.bookkeeping_marks m
                   WHERE m.xact = pg_current_xact_id() AND m.schedule_id = 0 AND m.kind = 'bulk')
$$;
