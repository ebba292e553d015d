-- How many due times of a cron expression any stretch of time holds at least (cron_period), so that SQL
-- can tell, without evaluating cron (workers do, agentlab_sched/core/cron.py), that a range surely holds
-- more due times than a limit (due_times_surely_over): backfill() refuses such a range when it is asked
-- for, before a worker counts it exactly.

-- The values of one time field (second, minute, hour: `lo`-`hi`) of a valid expression: lists, ranges and
-- steps of numbers. NULL for a form it does not read (H), which leaves the expression without a bound.
CREATE OR REPLACE FUNCTION agentlab_sched._cron_time_values(txt text, lo int, hi int) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    item text;
    m text[];
    a int;
    b int;
    step int;
    found int[] := '{}';
BEGIN
    FOREACH item IN ARRAY string_to_array(txt, ',') LOOP
        m := regexp_match(item, '^(\*|[0-9]+)(?:-([0-9]+))?(?:/([0-9]+))?$');
        IF m IS NULL THEN
            RETURN NULL;
        END IF;
        step := coalesce(m[3]::int, 1);
        a := CASE WHEN m[1] = '*' THEN lo ELSE m[1]::int END;
        b := CASE WHEN m[2] IS NOT NULL THEN m[2]::int WHEN m[1] = '*' OR m[3] IS NOT NULL THEN hi ELSE a END;
        IF step < 1 THEN
            RETURN NULL;
        END IF;
        found := found || ARRAY(SELECT generate_series(a, b, step));
    END LOOP;
    RETURN found;
END
$$;

-- A period and how many due times of `expr` every stretch of that length holds at least, on the local
-- wall clock: a day holds each time of the day once; a week each matching weekday (a day of the month
-- cannot take them away: with OR it adds days); 31 days each day of the month up to 28; an interval's
-- period holds one. NULL when this cannot tell (a year field, months, day forms such as L, W or #, H
-- values): then only the worker's exact count refuses.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_period(expr text, OUT period interval, OUT holds bigint)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    txt text := lower(btrim(coalesce(expr, ''), E' \t\n\r\f' || chr(11)) COLLATE "C");
    parts text[];
    every text[];
    n int;
    f_second text := '0';
    f_minute text;
    f_hour text;
    f_dom text;
    f_month text;
    f_dow text;
    days int[];
    names text;
    per_day bigint;
BEGIN
    every := regexp_match(txt, '^@every[ \t]+(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?([ \t]|$)');
    IF every IS NOT NULL THEN  -- real elapsed time from an anchor: one every interval
        period := make_interval(days => coalesce(every[1]::int, 0), hours => coalesce(every[2]::int, 0),
                                mins => coalesce(every[3]::int, 0), secs => coalesce(every[4]::int, 0));
        holds := 1;
        RETURN;
    END IF;
    every := regexp_match(txt, '^([0-9]+)[ \t]+seconds?$');  -- pg_cron's 'N seconds'
    IF every IS NOT NULL THEN
        period := make_interval(secs => every[1]::int);
        holds := 1;
        RETURN;
    END IF;
    txt := CASE txt WHEN '@monthly' THEN '0 0 1 * *' WHEN '@weekly' THEN '0 0 * * 0' WHEN '@daily' THEN '0 0 * * *'
                    WHEN '@midnight' THEN '0 0 * * *' WHEN '@hourly' THEN '0 * * * *' ELSE txt END;
    parts := regexp_split_to_array(txt, '[ \t\n\r\f\v]+');
    n := cardinality(parts);
    IF n = 5 OR n = 6 THEN  -- minute hour dom month dow [second]
        f_minute := parts[1]; f_hour := parts[2]; f_dom := parts[3]; f_month := parts[4]; f_dow := parts[5];
        f_second := CASE WHEN n = 6 THEN parts[6] ELSE '0' END;
    ELSIF n = 7 AND parts[7] = '*' THEN  -- Quartz: second minute hour dom month dow year
        f_second := parts[1]; f_minute := parts[2]; f_hour := parts[3]; f_dom := parts[4]; f_month := parts[5];
        f_dow := parts[6];
    ELSE
        RETURN;
    END IF;
    IF f_month <> '*' THEN
        RETURN;
    END IF;
    SELECT count(DISTINCT h * 3600 + m * 60 + x) INTO per_day
    FROM unnest(agentlab_sched._cron_time_values(f_hour, 0, 23)) h,
         unnest(agentlab_sched._cron_time_values(f_minute, 0, 59)) m,
         unnest(agentlab_sched._cron_time_values(f_second, 0, 59)) x;
    IF coalesce(per_day, 0) = 0 THEN
        RETURN;
    END IF;
    -- Days of month and of week combine as in cron.py: AND when either starts with * or is ?, else OR.
    IF f_dom IN ('*', '?') AND f_dow IN ('*', '?') THEN
        -- Every day; with every hour (and every minute), every hour (minute) is a period of its own.
        IF f_hour = '*' AND f_minute = '*' THEN
            period := interval '1 minute';
            holds := cardinality(agentlab_sched._cron_time_values(f_second, 0, 59));
        ELSIF f_hour = '*' THEN
            period := interval '1 hour';
            holds := per_day / 24;
        ELSE
            period := interval '1 day';
            holds := per_day;
        END IF;
    ELSIF f_dow NOT IN ('*', '?') AND (f_dom IN ('*', '?') OR (left(f_dom, 1) <> '*' AND left(f_dow, 1) <> '*')) THEN
        names := f_dow;
        FOR k IN 1..7 LOOP  -- day names as numbers (lower case here)
            names := replace(names, (ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'])[k], (k - 1)::text);
        END LOOP;
        days := agentlab_sched._cron_time_values(names, 0, 7);
        IF days IS NULL THEN
            RETURN;
        END IF;
        period := interval '7 days';
        holds := per_day * (SELECT count(DISTINCT d % 7) FROM unnest(days) d);
    ELSIF f_dow IN ('*', '?') THEN
        days := agentlab_sched._cron_time_values(f_dom, 1, 31);
        IF days IS NULL THEN
            RETURN;
        END IF;
        period := interval '31 days';
        holds := per_day * (SELECT count(DISTINCT d) FROM unnest(days) d WHERE d <= 28);
    END IF;
END
$$;

-- Whether [`from`, `to`] surely holds more than `most` due times of `expr` in zone `tz` (false when it
-- cannot tell): the whole periods it spans hold `holds` each (cron_period), less what a DST or offset
-- change can take (the periods its shift spans, and one more: the fires a gap skips, a stretch it
-- shortens). The changes are read off the zone hour by hour over a range of up to two years (a day
-- beyond each end); over a longer one, 6 a year of 4 hours each are allowed (more than any zone has had).
CREATE OR REPLACE FUNCTION agentlab_sched.due_times_surely_over(expr text, tz text, "from" timestamptz,
                                                                "to" timestamptz, most integer)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record := agentlab_sched.cron_period(expr);
    length numeric := extract(epoch FROM p.period);
    span numeric := extract(epoch FROM "to" - "from");
    lost numeric;
BEGIN
    IF length IS NULL OR length <= 0 OR coalesce(p.holds, 0) <= 0 OR span IS NULL OR span <= 0 THEN
        RETURN false;
    END IF;
    IF expr ~* '^[ \t]*(@every|[0-9]+[ \t]+seconds?[ \t]*$)' THEN
        lost := 0;  -- real elapsed time: the clock does not move it
    ELSIF span <= 2 * 366 * 86400 THEN
        SELECT coalesce(sum(ceil(abs(extract(epoch FROM o.shift)) / length) + 1), 0) INTO lost
        FROM (SELECT x.off - lag(x.off) OVER (ORDER BY x.at) AS shift
              FROM (SELECT at, (at AT TIME ZONE tz) - (at AT TIME ZONE 'UTC') AS off
                    FROM generate_series("from" - interval '1 day', "to" + interval '1 day', interval '1 hour') at) x
             ) o
        WHERE o.shift <> interval '0';
    ELSE
        lost := 6 * (floor(span / (365 * 86400)) + 1) * (ceil(4 * 3600 / length) + 1);
    END IF;
    RETURN (floor(span / length) - lost) * p.holds > most;
END
$$;
