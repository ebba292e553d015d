-- Cron and time zone validation inside the database: exactly the language agentlab_sched/core/cron.py
-- evaluates (docs/cron.md), with the same error codes and parameters; tests/core/test_cron_sql.py holds
-- the two together with a property test. Workers evaluate cron (Python); SQL only validates.
--
-- A problem is jsonb {"code": ..., "field": "cron" | "timezone", "params": {...}}, NULL when valid;
-- check_cron / check_timezone raise it with agentlab_sched.fail() (SQLSTATE 22023).

-- Field `idx` of a cron expression: 1 minute, 2 hour, 3 day-of-month, 4 month, 5 day-of-week, 6 second
-- (the order of five and six fields), 7 year (seven fields are Quartz's: second first, year last).
CREATE OR REPLACE FUNCTION agentlab_sched._cron_problem(code text, idx int, params jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'code', code,
        'field', 'cron',
        'params', jsonb_build_object('field', jsonb_build_object('msg', 'cron.field.' ||
            (ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week', 'second', 'year'])[idx])) || params)
$$;

-- One number or name of field `idx`: its value, or the problem with it (checks in cron.py's order).
-- `item` is the list item the token is part of (named when a day form sits inside a range or step).
CREATE OR REPLACE FUNCTION agentlab_sched._cron_value(token text, idx int, item text, OUT value int, OUT problem jsonb)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lo int;
    hi int;
    names text[];
    upper_token text;
    letters boolean;
    pos int;
    dom_form boolean;
BEGIN
    IF token ~ '^[0-9]+$' THEN
        lo := (ARRAY[0, 0, 1, 1, 0, 0, 1970])[idx];
        hi := (ARRAY[59, 23, 31, 12, 7, 59, 2199])[idx];
        IF length(ltrim(token, '0')) <= 9 THEN  -- fits an int (leading zeros do not count)
            value := token::int;
        END IF;
        IF value IS NULL OR value < lo OR value > hi THEN
            value := NULL;
            problem := agentlab_sched._cron_problem('cron.out_of_range', idx,
                jsonb_build_object('value', token, 'min', lo, 'max', hi));
        END IF;
        RETURN;
    END IF;
    names := CASE idx
        WHEN 4 THEN ARRAY['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC']
        WHEN 5 THEN ARRAY['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT']
    END;
    upper_token := upper(token COLLATE "C");  -- ASCII letters only, whatever the database locale
    letters := token COLLATE "C" ~ '^[A-Za-z]+$';
    IF names IS NOT NULL AND letters THEN
        pos := array_position(names, upper_token);
        IF pos IS NOT NULL THEN
            value := CASE idx WHEN 4 THEN pos ELSE pos - 1 END;
            RETURN;
        END IF;
    END IF;
    dom_form := upper_token ~ '^([L$](-.*)?|[L$]W|[0-9]+W|W[0-9]+)$';
    IF dom_form OR upper_token ~ '^(([0-9]+|[A-Z]{3})(#.*|L)|L([0-9]+|[A-Z]{3}))$' THEN
        -- a day form inside a range or a step
        problem := agentlab_sched._cron_problem(
            CASE WHEN idx = CASE WHEN dom_form THEN 3 ELSE 5 END THEN 'cron.special_combined'
                 ELSE 'cron.special_misplaced' END,
            idx, jsonb_build_object('value', item));
    ELSIF names IS NOT NULL AND letters THEN
        problem := agentlab_sched._cron_problem('cron.name_unknown', idx, jsonb_build_object(
            'value', token, 'names', CASE idx WHEN 4 THEN 'JAN-DEC' ELSE 'SUN-SAT' END));
    ELSE
        problem := agentlab_sched._cron_problem('cron.not_a_number', idx, jsonb_build_object('value', token));
    END IF;
END
$$;

-- One field: the problem with it, if any, and for day-of-month and month what the check for days that
-- never come needs: `needs` holds, per day-of-month item, the month length it needs to occur (n for n
-- and nW, 1 for L and LW, k + 1 for L-k); for the month field, its values.
CREATE OR REPLACE FUNCTION agentlab_sched._cron_field_check(txt text, idx int, OUT needs int[], OUT problem jsonb)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lo int := (ARRAY[0, 0, 1, 1, 0, 0, 1970])[idx];
    hi int := (ARRAY[59, 23, 31, 12, 7, 59, 2199])[idx];
    star_hi int := (ARRAY[59, 23, 31, 12, 6, 59, 2199])[idx];  -- * and a/n end at 6 in day-of-week
    hash_m text[];
    day_field boolean := idx IN (3, 5);
    item text;
    up text;
    base text;
    step_text text;
    slash int;
    ends text[];
    first_value int;
    last_value int;
    step int;
    is_dom boolean;
    part text;
    r record;
BEGIN
    needs := '{}';
    IF day_field AND txt = '?' THEN
        txt := '*';
    END IF;
    FOREACH item IN ARRAY string_to_array(txt, ',') LOOP
        IF item = '' THEN
            problem := agentlab_sched._cron_problem('cron.list_empty_item', idx, jsonb_build_object('value', txt));
            RETURN;
        END IF;
        IF strpos(item, '?') > 0 THEN
            problem := agentlab_sched._cron_problem(
                CASE WHEN day_field THEN 'cron.question_alone' ELSE 'cron.special_misplaced' END, idx,
                jsonb_build_object('value', CASE WHEN day_field THEN txt ELSE item END));
            RETURN;
        END IF;
        up := upper(item COLLATE "C");
        IF up ~ '^[HR]([(/].*)?$' THEN
            -- Jenkins' H forms (the value depends on the schedule's name: Python picks it; whether the
            -- expression is valid never does); croniter's random R is refused.
            IF left(up, 1) = 'R' THEN
                problem := agentlab_sched._cron_problem('cron.hashed', idx, jsonb_build_object('value', item));
                RETURN;
            END IF;
            IF idx = 7 THEN
                problem := agentlab_sched._cron_problem('cron.special_misplaced', idx, jsonb_build_object('value', item));
                RETURN;
            END IF;
            hash_m := regexp_match(item, '^[Hh](?:\(([^()]*)\))?(?:/(.*))?$');
            IF hash_m IS NULL THEN
                problem := agentlab_sched._cron_problem('cron.hash_malformed', idx, jsonb_build_object('value', item));
                RETURN;
            END IF;
            first_value := lo;
            last_value := CASE WHEN idx = 3 THEN 28 ELSE star_hi END;  -- H in day-of-month: 1-28, as Jenkins
            IF hash_m[1] IS NOT NULL THEN
                ends := string_to_array(hash_m[1], '-');
                IF cardinality(ends) IS DISTINCT FROM 2 OR ends[1] = '' OR ends[2] = '' THEN
                    problem := agentlab_sched._cron_problem('cron.hash_malformed', idx,
                        jsonb_build_object('value', item));
                    RETURN;
                END IF;
                r := agentlab_sched._cron_value(ends[1], idx, item);
                IF r.problem IS NOT NULL THEN
                    problem := r.problem;
                    RETURN;
                END IF;
                first_value := r.value;
                r := agentlab_sched._cron_value(ends[2], idx, item);
                IF r.problem IS NOT NULL THEN
                    problem := r.problem;
                    RETURN;
                END IF;
                last_value := r.value;
                IF first_value > last_value THEN
                    problem := agentlab_sched._cron_problem('cron.range_reversed', idx,
                        jsonb_build_object('value', hash_m[1]));
                    RETURN;
                END IF;
            END IF;
            IF hash_m[2] IS NOT NULL THEN
                IF hash_m[2] !~ '^[0-9]+$' THEN
                    problem := agentlab_sched._cron_problem('cron.step_not_number', idx,
                        jsonb_build_object('value', item));
                    RETURN;
                END IF;
                IF hash_m[2]::numeric < 1 OR hash_m[2]::numeric > hi THEN
                    problem := agentlab_sched._cron_problem('cron.step_out_of_range', idx,
                        jsonb_build_object('value', hash_m[2], 'min', 1, 'max', hi));
                    RETURN;
                END IF;
            END IF;
            IF idx IN (3, 4) THEN  -- every value it could take, whatever the name (days that never come)
                FOR v IN first_value..last_value LOOP
                    needs := needs || v;
                END LOOP;
            END IF;
            CONTINUE;
        END IF;
        is_dom := up ~ '^([L$](-.*)?|[L$]W|[0-9]+W|W[0-9]+)$';
        IF is_dom OR up ~ '^(([0-9]+|[A-Z]{3})(#.*|L)|L([0-9]+|[A-Z]{3}))$' THEN
            IF idx <> (CASE WHEN is_dom THEN 3 ELSE 5 END) THEN
                problem := agentlab_sched._cron_problem('cron.special_misplaced', idx, jsonb_build_object('value', item));
                RETURN;
            END IF;
            IF idx = 3 THEN
                IF up IN ('L', '$', 'LW', '$W') THEN
                    needs := needs || 1;
                ELSIF substr(up, 2, 1) = '-' THEN
                    part := substr(up, 3);
                    IF part !~ '^[0-9]+$' OR part::numeric < 1 OR part::numeric > 30 THEN
                        problem := agentlab_sched._cron_problem('cron.last_offset', idx,
                            jsonb_build_object('value', item));
                        RETURN;
                    END IF;
                    needs := needs || (part::int + 1);
                ELSIF left(up, 1) = 'W' THEN
                    problem := agentlab_sched._cron_problem('cron.w_prefix', idx,
                        jsonb_build_object('value', item, 'suggestion', substr(item, 2) || left(item, 1)));
                    RETURN;
                ELSE
                    r := agentlab_sched._cron_value(left(item, -1), idx, item);
                    IF r.problem IS NOT NULL THEN
                        problem := r.problem;
                        RETURN;
                    END IF;
                    needs := needs || r.value;
                END IF;
            ELSIF left(up, 1) = 'L' AND right(up, 1) <> 'L' AND strpos(up, '#') = 0 THEN
                problem := agentlab_sched._cron_problem('cron.l_prefix', idx,
                    jsonb_build_object('value', item, 'suggestion', substr(item, 2) || left(item, 1)));
                RETURN;
            ELSIF strpos(up, '#') > 0 THEN
                r := agentlab_sched._cron_value(split_part(item, '#', 1), idx, item);
                IF r.problem IS NOT NULL THEN
                    problem := r.problem;
                    RETURN;
                END IF;
                part := substr(item, strpos(item, '#') + 1);
                IF part !~ '^[0-9]+$' OR part::numeric < 1 OR part::numeric > 5 THEN
                    problem := agentlab_sched._cron_problem('cron.nth_out_of_range', idx,
                        jsonb_build_object('value', item));
                    RETURN;
                END IF;
            ELSE
                r := agentlab_sched._cron_value(left(item, -1), idx, item);
                IF r.problem IS NOT NULL THEN
                    problem := r.problem;
                    RETURN;
                END IF;
            END IF;
            CONTINUE;
        END IF;
        slash := strpos(item, '/');
        IF slash > 0 THEN
            base := left(item, slash - 1);
            step_text := substr(item, slash + 1);
        ELSE
            base := item;
            step_text := NULL;
        END IF;
        IF base = '*' THEN
            first_value := lo;
            last_value := star_hi;
        ELSIF base = '' THEN
            problem := agentlab_sched._cron_problem('cron.malformed', idx, jsonb_build_object('value', item));
            RETURN;
        ELSIF strpos(base, '-') > 0 THEN
            ends := string_to_array(base, '-');
            IF cardinality(ends) <> 2 OR ends[1] = '' OR ends[2] = '' THEN
                problem := agentlab_sched._cron_problem('cron.malformed', idx, jsonb_build_object('value', item));
                RETURN;
            END IF;
            r := agentlab_sched._cron_value(ends[1], idx, item);
            IF r.problem IS NOT NULL THEN
                problem := r.problem;
                RETURN;
            END IF;
            first_value := r.value;
            r := agentlab_sched._cron_value(ends[2], idx, item);
            IF r.problem IS NOT NULL THEN
                problem := r.problem;
                RETURN;
            END IF;
            last_value := r.value;
            IF idx = 5 AND last_value = 0 AND first_value > 0 THEN
                last_value := 7;  -- a range ending at Sunday: SAT-SUN is 6-7
            END IF;
            IF first_value > last_value THEN
                problem := agentlab_sched._cron_problem('cron.range_reversed', idx, jsonb_build_object('value', base));
                RETURN;
            END IF;
        ELSE
            r := agentlab_sched._cron_value(base, idx, item);
            IF r.problem IS NOT NULL THEN
                problem := r.problem;
                RETURN;
            END IF;
            first_value := r.value;
            last_value := CASE WHEN slash > 0 THEN greatest(first_value, star_hi) ELSE first_value END;
        END IF;
        step := 1;
        IF slash > 0 THEN
            IF step_text !~ '^[0-9]+$' THEN
                problem := agentlab_sched._cron_problem('cron.step_not_number', idx, jsonb_build_object('value', item));
                RETURN;
            END IF;
            IF step_text::numeric < 1 OR step_text::numeric > hi THEN
                problem := agentlab_sched._cron_problem('cron.step_out_of_range', idx,
                    jsonb_build_object('value', step_text, 'min', 1, 'max', hi));
                RETURN;
            END IF;
            step := step_text::int;
        END IF;
        IF idx IN (3, 4) THEN  -- the values matter for day-of-month and month only (days that never come)
            FOR v IN first_value..last_value BY step LOOP
                needs := needs || v;
            END LOOP;
        END IF;
    END LOOP;
END
$$;

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
