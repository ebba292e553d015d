-- Cron validation inside the database, one field at a time: a number or name of a field, a field with its
-- lists, ranges, steps, L/W/# and H forms. The whole expression, @every and time zones are in 21_cron.sql.
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
