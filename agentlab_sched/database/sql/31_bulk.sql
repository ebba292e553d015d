-- Many schedules in one call: schedule_many(definitions jsonb), a JSON array of objects whose keys are
-- schedule()'s argument names. All validated, all or nothing; a refusal names the definition (its place
-- in the array, from 1, and its name) and the field, with the words schedule() would use.
--
-- A million definitions in one statement: the per-row validation trigger (plpgsql, tens of checks per
-- row) would take about 2 ms a row, so the checks are made set-based here instead: the shape of every
-- row at once, the checks that differ row by row (name, casts) as one pass, and validate_schedule() once
-- per distinct definition apart from its name (a million per-tenant schedules share a handful). The
-- insert then runs under the bulk key (in_bulk_insert(), 26_schedule_fields.sql), which only the owner
-- can set, telling the triggers the rows were validated and made as stored: no second validation, no
-- trigger call per row, the audit rows written set-based and one NOTIFY instead of a million.

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
SET work_mem = '64MB'  -- the definitions' order sorted in memory: a million rows
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
    id_seq regclass := pg_get_serial_sequence('agentlab_sched.schedules', 'id')::regclass;
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
        -- Names given twice (looked for by hash first; sorted to say which only when there are), names taken.
        PERFORM FROM jsonb_array_elements(definitions) AS t(e) GROUP BY t.e ->> 'name' HAVING count(*) > 1 LIMIT 1;
        IF FOUND THEN
            SELECT d.ord, d.name, d.first INTO cur_row, cur_name, other
            FROM (SELECT t.ord, t.e ->> 'name' AS name,
                         min(t.ord) OVER (PARTITION BY t.e ->> 'name') AS first
                  FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)) d
            WHERE d.ord <> d.first ORDER BY d.ord LIMIT 1;
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
            SELECT f.first, definitions -> (f.first - 1)::integer
            FROM (SELECT min(t.ord) AS first
                  FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)
                  GROUP BY t.e - 'name') f
            ORDER BY 1
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
    -- Validated: each distinct definition apart from the name made once into the row it stores (its
    -- defaults, its cron's spelling and a new schedule's bookkeeping, by the write trigger's own
    -- functions) with its audit values, then inserted under the bulk key: the triggers leave the rows
    -- alone, and each audit row is its definition's values with the schedule's id and name.
    base.replan := 'now';
    base.created_at := now();
    base.updated_at := now();
    base.webhook_configured := false;
    base.webhook_has_secret := false;
    PERFORM agentlab_sched.bulk_insert_begin();
    BEGIN
        -- The ids are taken in the definitions' order before the two inserts, which then need no join of
        -- the schedules inserted back to their definitions.
        WITH d AS (
            SELECT t.ord, t.e ->> 'name' AS name, t.e - 'name' AS def
            FROM jsonb_array_elements(definitions) WITH ORDINALITY AS t(e, ord)),
        g AS (
            SELECT x.grp, x.def, (x.r).*, agentlab_sched.schedule_audit_values(x.r) - 'id' - 'name' AS audit
            FROM (SELECT row_number() OVER () AS grp, dd.def, agentlab_sched._bulk_stored(base, dd.e) AS r
                  FROM (SELECT d.def, d.def || jsonb_build_object('name', min(d.name)) AS e
                        FROM d GROUP BY d.def) dd) x),
        numbered AS (
            SELECT nextval(id_seq) AS id, o.name, o.grp
            FROM (SELECT d.ord, d.name, g.grp FROM d JOIN g ON g.def = d.def ORDER BY d.ord) o),
        ins AS (
            INSERT INTO agentlab_sched.schedules AS s
                (id, name, cron, timezone, task, inputs, queue, priority, overlap, misfire_grace, timeout, enabled,
                 catchup, max_catchup, starts_at, ends_at, remaining_runs, pause_after_failures,
                 consecutive_failures, paused_at, context, next_run_at, replan, version, created_at, updated_at,
                 webhook_events, failure_epoch, on_interrupt, replan_at, dst_gap, dst_repeat)
            OVERRIDING SYSTEM VALUE
            SELECT n.id, n.name, g.cron, g.timezone, g.task, g.inputs, g.queue, g.priority,
                   g.overlap, g.misfire_grace, g.timeout, g.enabled, g.catchup,
                   g.max_catchup, g.starts_at, g.ends_at, g.remaining_runs,
                   g.pause_after_failures, g.consecutive_failures, g.paused_at, g.context,
                   g.next_run_at, g.replan, g.version, g.created_at, g.updated_at,
                   g.webhook_events, g.failure_epoch, g.on_interrupt, g.replan_at,
                   g.dst_gap, g.dst_repeat
            FROM numbered n JOIN g ON g.grp = n.grp
            RETURNING 1),
        audit AS (
            INSERT INTO agentlab_sched.schedule_changes
                (schedule_id, schedule_name, operation, db_role, application_name, old_values, new_values)
            SELECT n.id, n.name, 'insert', session_user, nullif(current_setting('application_name', true), ''),
                   NULL, jsonb_build_object('id', n.id, 'name', n.name) || g.audit  -- (the small one first: 2x faster)
            FROM numbered n JOIN g ON g.grp = n.grp)
        SELECT count(*) INTO created FROM ins;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM agentlab_sched.bulk_insert_end();
        RAISE;
    END;
    PERFORM agentlab_sched.bulk_insert_end();
    PERFORM pg_notify('agentlab_sched_schedules', '0');
    RETURN created;
END
$$;

-- The row a validated definition `e` stores, from the defaults (`base`): as _bulk_row() reads it, in the
-- cron's spelling, with a new schedule's bookkeeping (what the write trigger does to an insert).
CREATE OR REPLACE FUNCTION agentlab_sched._bulk_stored(base agentlab_sched.schedules, e jsonb)
RETURNS agentlab_sched.schedules
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.schedules := agentlab_sched._bulk_row(base, e);
BEGIN
    r.cron := agentlab_sched.cron_spelling(r.cron);
    RETURN agentlab_sched.inserted_schedule(r);
END
$$;
