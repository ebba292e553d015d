-- Cron and time zone validation inside the database, the whole expression: @every, cron_problem() and
-- check_cron(), timezone_problem() and check_timezone(). The fields' checks are in 20_cron_fields.sql.
-- Exactly the language agentlab_sched/core/cron.py evaluates (docs/cron.md), with the same error codes
-- and parameters; tests/core/test_cron_sql.py holds the two together. Workers evaluate cron; SQL validates.

-- NULL when `txt` (trimmed, starting with @every in any case) is a valid interval, else the problem.
CREATE OR REPLACE FUNCTION agentlab_sched._cron_every_problem(txt text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    parts text[] := regexp_split_to_array(txt, '[ \t\n\r\f\v]+');
    n int := cardinality(parts) - 1;
    dur text[];
    total numeric;
    m text[];
    y int;
    mo int;
    d int;
    h int;
    mi int;
    s int;
    month_days int;
    params jsonb := jsonb_build_object('value', txt);
BEGIN
    IF n >= 1 THEN
        dur := regexp_match(lower(parts[2] COLLATE "C"),
                            '^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$');
    END IF;
    IF dur IS NULL OR (n > 1 AND lower(parts[3] COLLATE "C") <> 'from') THEN
        RETURN jsonb_build_object('code', 'cron.every_malformed', 'field', 'cron', 'params', params);
    END IF;
    IF n NOT IN (1, 3, 4) THEN
        RETURN jsonb_build_object('code', CASE WHEN n = 2 THEN 'cron.every_malformed' ELSE 'cron.every_anchor' END,
                                  'field', 'cron', 'params', params);
    END IF;
    total := coalesce(dur[1]::numeric, 0) * 86400 + coalesce(dur[2]::numeric, 0) * 3600
             + coalesce(dur[3]::numeric, 0) * 60 + coalesce(dur[4]::numeric, 0);
    IF total < 1 OR total > 366 * 86400 THEN
        RETURN jsonb_build_object('code', 'cron.every_out_of_range', 'field', 'cron', 'params', params);
    END IF;
    IF n = 1 THEN
        RETURN NULL;
    END IF;
    m := regexp_match(array_to_string(parts[4:], ' '),
                      '^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?$');
    IF m IS NOT NULL THEN
        y := m[1]::int; mo := m[2]::int; d := m[3]::int; h := m[4]::int; mi := m[5]::int;
        s := coalesce(m[6], '0')::int;
    ELSE
        m := regexp_match(array_to_string(parts[4:], ' '), '^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?$');
        IF m IS NULL THEN
            RETURN jsonb_build_object('code', 'cron.every_anchor', 'field', 'cron', 'params', params);
        END IF;
        y := 2000; mo := 1; d := 1; h := m[1]::int; mi := m[2]::int; s := coalesce(m[3], '0')::int;
    END IF;
    IF y < 1 OR mo < 1 OR mo > 12 OR h > 23 OR mi > 59 OR s > 59 THEN
        RETURN jsonb_build_object('code', 'cron.every_anchor', 'field', 'cron', 'params', params);
    END IF;
    month_days := (ARRAY[31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[mo]
        + CASE WHEN mo = 2 AND ((y % 4 = 0 AND y % 100 <> 0) OR y % 400 = 0) THEN 1 ELSE 0 END;
    IF d < 1 OR d > month_days THEN
        RETURN jsonb_build_object('code', 'cron.every_anchor', 'field', 'cron', 'params', params);
    END IF;
    RETURN NULL;
END
$$;

-- NULL when `expr` is a valid cron expression, else {"code", "field": "cron", "params"} exactly as
-- agentlab_sched.cron.parse() raises it.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_problem(expr text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Spaces and tabs (ASCII whitespace; chr(11) is the vertical tab).
    space text := E' \t\n\r\f' || chr(11);
    txt text := btrim(coalesce(expr, ''), space);
    parts text[];
    n int;
    r record;
    dom int[];
    months int[];
    d int;
    m int;
    longest int := 0;
    -- Which field each written position is: seven fields are Quartz's (second first, year last).
    order_of int[];
    dom_text text;
    month_text text;
    dow_text text;
BEGIN
    IF txt = '' THEN
        RETURN jsonb_build_object('code', 'cron.empty', 'field', 'cron', 'params', '{}'::jsonb);
    END IF;
    parts := regexp_split_to_array(txt, '[ \t\n\r\f\v]+');
    n := cardinality(parts);
    IF lower(parts[1] COLLATE "C") = '@every' THEN
        RETURN agentlab_sched._cron_every_problem(txt);
    END IF;
    IF n = 2 AND lower(parts[2] COLLATE "C") IN ('second', 'seconds') THEN  -- pg_cron's 'N seconds'
        IF parts[1] !~ '^[0-9]+$' OR parts[1]::numeric < 1 OR parts[1]::numeric > 59 THEN
            RETURN jsonb_build_object('code', 'cron.seconds_interval', 'field', 'cron',
                'params', jsonb_build_object('value', txt));
        END IF;
        RETURN NULL;
    END IF;
    IF left(txt, 1) = '@' THEN
        IF lower(txt COLLATE "C") IN ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly')
        THEN
            RETURN NULL;  -- the macros' expansions are valid
        END IF;
        RETURN jsonb_build_object('code', 'cron.macro_unknown', 'field', 'cron',
            'params', jsonb_build_object('value', txt));
    END IF;
    IF n NOT IN (5, 6, 7) THEN
        RETURN jsonb_build_object('code', 'cron.field_count', 'field', 'cron',
            'params', jsonb_build_object('count', n, 'expr', txt));
    END IF;
    order_of := CASE WHEN n = 7 THEN ARRAY[6, 1, 2, 3, 4, 5, 7] ELSE ARRAY[1, 2, 3, 4, 5, 6] END;
    FOR i IN 1..n LOOP
        r := agentlab_sched._cron_field_check(parts[i], order_of[i]);
        IF r.problem IS NOT NULL THEN
            RETURN r.problem;
        END IF;
        IF order_of[i] = 3 THEN
            dom := r.needs;
            dom_text := parts[i];
        ELSIF order_of[i] = 4 THEN
            months := r.needs;
            month_text := parts[i];
        ELSIF order_of[i] = 5 THEN
            dow_text := parts[i];
        END IF;
    END LOOP;
    -- With AND (either day field starts with * or is ?), a day-of-month no month has never fires.
    IF left(dom_text, 1) = '*' OR left(dow_text, 1) = '*' OR '?' IN (dom_text, dow_text) THEN
        FOREACH m IN ARRAY months LOOP
            longest := greatest(longest, (ARRAY[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[m]);
        END LOOP;
        FOREACH d IN ARRAY dom LOOP
            IF d <= longest THEN
                RETURN NULL;
            END IF;
        END LOOP;
        RETURN agentlab_sched._cron_problem('cron.day_never', 3,
            jsonb_build_object('value', dom_text, 'month', month_text));
    END IF;
    RETURN NULL;
END
$$;

-- Raise the problem with `expr` (SQLSTATE 22023, message in the session's locale), if any.
CREATE OR REPLACE FUNCTION agentlab_sched.check_cron(expr text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem jsonb;
BEGIN
    -- Checked before it is parsed: a huge expression would take seconds (agentlab_sched/limits.py).
    IF char_length(expr) > agentlab_sched.size_limit('cron_chars') THEN
        PERFORM agentlab_sched.fail('schedule.too_long', 'cron', jsonb_build_object(
            'field', agentlab_sched.field_term('cron'), 'length', char_length(expr),
            'max', agentlab_sched.size_limit('cron_chars')));
    END IF;
    problem := agentlab_sched.cron_problem(expr);
    IF problem IS NOT NULL THEN
        PERFORM agentlab_sched.fail(problem ->> 'code', 'cron', problem -> 'params');
    END IF;
END
$$;

-- NULL when `tz` is a time zone both PostgreSQL and Python's zoneinfo know by that exact name, else
-- {"code": "timezone.unknown", "field": "timezone", "params": {"value": tz}}.
-- PostgreSQL also accepts abbreviations ('PST': not in TimeZone), other spellings ('america/new_york')
-- and POSIX strings ('UTC+3', 'GMT+5'), which zoneinfo does not. The test loads the zone as the
-- TimeZone setting (cached by the server, a few microseconds) inside a subtransaction that is then
-- rolled back, so the caller's setting never changes; pg_timezone_names (tens of milliseconds: it
-- reads every zone file) is consulted only for the rare names without '/' that contain a digit,
-- where a zone file (EST5EDT, GMT0) and a POSIX string (GMT+5) look alike.
CREATE OR REPLACE FUNCTION agentlab_sched.timezone_problem(tz text) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    canonical text;
    problem jsonb := jsonb_build_object('code', 'timezone.unknown', 'field', 'timezone',
                                        'params', jsonb_build_object('value', tz));
BEGIN
    IF tz = 'UTC' THEN
        RETURN NULL;
    END IF;
    IF tz IS NULL OR tz !~ '^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$'
       OR tz IN ('localtime', 'posixrules') OR tz ~ '^(posix|right)/' THEN
        RETURN problem;
    END IF;
    BEGIN
        PERFORM set_config('TimeZone', tz, true);
        canonical := current_setting('TimeZone');
        RAISE EXCEPTION USING ERRCODE = 'P0004';  -- roll the setting back
    EXCEPTION
        WHEN invalid_parameter_value THEN
            RETURN problem;
        WHEN assert_failure THEN
            NULL;
    END;
    IF canonical IS DISTINCT FROM tz THEN
        RETURN problem;  -- another spelling of a zone name
    END IF;
    IF strpos(tz, '/') = 0 AND tz ~ '[0-9]' AND NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = tz) THEN
        RETURN problem;  -- a POSIX string, not a zone file
    END IF;
    RETURN NULL;
END
$$;

-- Raise the problem with `tz` (SQLSTATE 22023, message in the session's locale), if any.
CREATE OR REPLACE FUNCTION agentlab_sched.check_timezone(tz text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem jsonb := agentlab_sched.timezone_problem(tz);
BEGIN
    IF problem IS NOT NULL THEN
        PERFORM agentlab_sched.fail(problem ->> 'code', 'timezone', problem -> 'params');
    END IF;
END
$$;
