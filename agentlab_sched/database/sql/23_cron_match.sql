-- Whether instants are due times of a cron expression in a time zone, as agentlab_sched/core/cron.py
-- evaluates it (its fields, H values hashed from the seed, day rules, intervals and DST policies).
-- Workers compute due times (Python); the database checks the ones a request is carried out at
-- (carry_out_request): matching one instant needs no walk. tests/core/test_cron_match_sql.py holds the
-- two together. The expression is valid (checked by cron_problem() when the schedule was saved).

-- Jenkins' hash of field `idx` for `seed`: the first 8 bytes of SHA-256(seed, NUL, the field's key), as an
-- unsigned number (cron.py's _hash).
CREATE OR REPLACE FUNCTION agentlab_sched._cron_hash(seed text, idx int) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT v::numeric + CASE WHEN v < 0 THEN 18446744073709551616 ELSE 0 END
    FROM (SELECT ('x' || encode(substr(sha256(convert_to(coalesce(seed, ''), 'UTF8') || '\x00'::bytea
              || convert_to((ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week', 'second', 'year'])[idx],
                            'UTF8')), 1, 8), 'hex'))::bit(64)::bigint AS v) h
$$;

-- The values of one valid field `idx` (numbering of 20_cron_fields.sql): plain values (day-of-week 0-6),
-- day-of-month's L-k offsets (L is 0), LW, nW days, and day-of-week's dL days and d#n as d * 10 + n.
CREATE OR REPLACE FUNCTION agentlab_sched._cron_field_values(txt text, idx int, seed text,
    OUT vals int[], OUT last int[], OUT last_weekday boolean, OUT nearest int[], OUT nth int[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lo int := (ARRAY[0, 0, 1, 1, 0, 0, 1970])[idx];
    star_hi int := (ARRAY[59, 23, 31, 12, 6, 59, 2199])[idx];
    item text;
    up text;
    m text[];
    a int;
    b int;
    step int;
    base text;
    slash int;
BEGIN
    vals := '{}'; last := '{}'; last_weekday := false; nearest := '{}'; nth := '{}';
    IF idx IN (3, 5) AND txt = '?' THEN
        txt := '*';
    END IF;
    FOREACH item IN ARRAY string_to_array(txt, ',') LOOP
        up := upper(item COLLATE "C");
        IF up ~ '^H([(/].*)?$' THEN
            m := regexp_match(item, '^[Hh](?:\(([^()]*)\))?(?:/(.*))?$');
            a := lo;
            b := CASE WHEN idx = 3 THEN 28 ELSE star_hi END;
            IF m[1] IS NOT NULL THEN
                a := (agentlab_sched._cron_value(split_part(m[1], '-', 1), idx, item)).value;
                b := (agentlab_sched._cron_value(split_part(m[1], '-', 2), idx, item)).value;
            END IF;
            IF m[2] IS NULL THEN
                vals := vals || (a + (agentlab_sched._cron_hash(seed, idx) % (b - a + 1))::int);
            ELSE
                step := m[2]::int;
                vals := vals || ARRAY(SELECT generate_series(
                    a + (agentlab_sched._cron_hash(seed, idx) % least(step, b - a + 1))::int, b, step));
            END IF;
        ELSIF idx = 3 AND up IN ('L', '$') THEN
            last := last || 0;
        ELSIF idx = 3 AND up IN ('LW', '$W') THEN
            last_weekday := true;
        ELSIF idx = 3 AND up ~ '^[L$]-' THEN
            last := last || substr(up, 3)::int;
        ELSIF idx = 3 AND up ~ '^[0-9]+W$' THEN
            nearest := nearest || left(up, -1)::int;
        ELSIF idx = 5 AND up ~ '#' THEN
            nth := nth || ((agentlab_sched._cron_value(split_part(item, '#', 1), idx, item)).value % 7 * 10
                           + split_part(item, '#', 2)::int);
        ELSIF idx = 5 AND up ~ '^([0-9]+|[A-Z]{3})L$' THEN
            last := last || (agentlab_sched._cron_value(left(item, -1), idx, item)).value % 7;
        ELSE
            slash := strpos(item, '/');
            base := CASE WHEN slash > 0 THEN left(item, slash - 1) ELSE item END;
            step := CASE WHEN slash > 0 THEN substr(item, slash + 1)::int ELSE 1 END;
            IF base = '*' THEN
                a := lo;
                b := star_hi;
            ELSIF strpos(base, '-') > 0 THEN
                a := (agentlab_sched._cron_value(split_part(base, '-', 1), idx, item)).value;
                b := (agentlab_sched._cron_value(split_part(base, '-', 2), idx, item)).value;
                IF idx = 5 AND b = 0 AND a > 0 THEN
                    b := 7;  -- a range ending at Sunday: SAT-SUN is 6-7
                END IF;
            ELSE
                a := (agentlab_sched._cron_value(base, idx, item)).value;
                b := CASE WHEN slash > 0 THEN greatest(a, star_hi) ELSE a END;
            END IF;
            vals := vals || ARRAY(SELECT generate_series(a, b, step));
        END IF;
    END LOOP;
    IF idx = 5 THEN
        vals := ARRAY(SELECT v % 7 FROM unnest(vals) v);
    END IF;
END
$$;

-- Whether day `d` matches the day rules (cron.py's _Days and _Weekdays, combined with AND or OR).
CREATE OR REPLACE FUNCTION agentlab_sched._cron_day_matches(d date, dom int[], dom_last int[], lw boolean,
                                                            near int[], dow int[], dow_last int[], nth int[],
                                                            day_and boolean)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    day int := extract(day FROM d)::int;
    wd int := extract(dow FROM d)::int;  -- 0 Sunday .. 6 Saturday
    last int := extract(day FROM date_trunc('month', d) + interval '1 month - 1 day')::int;
    dom_ok boolean;
    dow_ok boolean;
    n int;
    nd int;
    nwd int;
BEGIN
    dom_ok := day = ANY (dom) OR (last - day) = ANY (dom_last)
        OR (lw AND day = last - greatest(0, extract(isodow FROM d + (last - day))::int - 5));
    IF NOT dom_ok THEN
        FOREACH n IN ARRAY near LOOP  -- the weekday nearest day n, never leaving the month
            CONTINUE WHEN n > last;
            nwd := extract(isodow FROM d + (n - day))::int;  -- 1 Monday .. 7 Sunday
            nd := CASE WHEN nwd = 6 THEN CASE WHEN n > 1 THEN n - 1 ELSE n + 2 END
                       WHEN nwd = 7 THEN CASE WHEN n < last THEN n + 1 ELSE n - 2 END
                       ELSE n END;
            IF nd = day THEN
                dom_ok := true;
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF day_and AND NOT dom_ok THEN
        RETURN false;
    END IF;
    IF NOT day_and AND dom_ok THEN
        RETURN true;
    END IF;
    dow_ok := wd = ANY (dow) OR (wd = ANY (dow_last) AND day + 7 > last) OR (wd * 10 + (day + 6) / 7) = ANY (nth);
    RETURN dow_ok;
END
$$;

-- The UTC offset of zone `tz` at instant `at`.
CREATE OR REPLACE FUNCTION agentlab_sched._zone_offset(at timestamptz, tz text) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (at AT TIME ZONE tz) - (at AT TIME ZONE 'UTC')
$$;

-- The position (from 1) of the first of `times` that is not a due time of `expr` in zone `tz` under the
-- DST policies, with `seed` (the schedule's name) for H values; NULL when every one is.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_not_due(expr text, tz text, dst_gap text, dst_repeat text,
                                                       seed text, times timestamptz[])
RETURNS int
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    txt text := btrim(expr, E' \t\n\r\f' || chr(11));
    parts text[] := regexp_split_to_array(txt, '[ \t\n\r\f\v]+');
    n int;
    order_of int[];
    f record;
    sec int[]; mi int[]; hr int[]; mon int[]; yr int[];
    dom int[]; dom_last int[]; lw boolean; near int[];
    dow int[]; dow_last int[]; nth int[];
    day_and boolean;
    fixed boolean;
    repeat text;
    every numeric;
    anchor timestamp;
    m text[];
    anchor_at timestamptz;
    t timestamptz;
    w timestamp;
    off interval;
    other timestamptz;
    o interval;
    c timestamptz;
    due boolean;
BEGIN
    IF lower(parts[1] COLLATE "C") = '@every' OR lower(parts[2] COLLATE "C") IN ('second', 'seconds') THEN
        anchor := '2000-01-01 00:00:00';
        IF lower(parts[1] COLLATE "C") = '@every' THEN
            m := regexp_match(lower(parts[2] COLLATE "C"), '^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$');
            every := coalesce(m[1]::numeric, 0) * 86400 + coalesce(m[2]::numeric, 0) * 3600
                     + coalesce(m[3]::numeric, 0) * 60 + coalesce(m[4]::numeric, 0);
            IF cardinality(parts) > 2 THEN
                anchor := CASE WHEN array_to_string(parts[4:], ' ') ~ '^[0-9]{1,2}:'
                               THEN '2000-01-01 ' || array_to_string(parts[4:], ' ')
                               ELSE replace(array_to_string(parts[4:], ' '), 'T', ' ') END::timestamp;
            END IF;
        ELSE
            every := parts[1]::numeric;
        END IF;
        -- The anchor's instant as zoneinfo's fold 0 gives it: its first occurrence, or in a gap the offset
        -- from before the jump.
        anchor_at := anchor AT TIME ZONE tz;
        o := agentlab_sched._zone_offset(anchor_at - interval '1 day', tz);
        c := (anchor - o) AT TIME ZONE 'UTC';
        IF (c AT TIME ZONE tz) = anchor AND c < anchor_at OR (anchor_at AT TIME ZONE tz) <> anchor THEN
            anchor_at := c;
        END IF;
        FOR i IN 1 .. coalesce(array_length(times, 1), 0) LOOP
            IF times[i] IS NULL OR (extract(epoch FROM times[i]) - extract(epoch FROM anchor_at)) % every <> 0 THEN
                RETURN i;
            END IF;
        END LOOP;
        RETURN NULL;
    END IF;
    IF left(txt, 1) = '@' THEN
        parts := string_to_array(CASE lower(txt COLLATE "C")
            WHEN '@yearly' THEN '0 0 1 1 *' WHEN '@annually' THEN '0 0 1 1 *' WHEN '@monthly' THEN '0 0 1 * *'
            WHEN '@weekly' THEN '0 0 * * 0' WHEN '@hourly' THEN '0 * * * *' ELSE '0 0 * * *' END, ' ');
    END IF;
    n := cardinality(parts);
    IF n = 7 THEN
        parts := parts[2:6] || parts[1] || parts[7];  -- Quartz's: the order of six fields, then the year
    END IF;
    sec := '{0}';
    FOR k IN 1 .. n LOOP
        f := agentlab_sched._cron_field_values(parts[k], k, seed);
        CASE k
            WHEN 1 THEN mi := f.vals;
            WHEN 2 THEN hr := f.vals;
            WHEN 3 THEN dom := f.vals; dom_last := f.last; lw := f.last_weekday; near := f.nearest;
            WHEN 4 THEN mon := f.vals;
            WHEN 5 THEN dow := f.vals; dow_last := f.last; nth := f.nth;
            WHEN 6 THEN sec := f.vals;
            ELSE yr := f.vals;
        END CASE;
    END LOOP;
    day_and := left(parts[3], 1) = '*' OR left(parts[5], 1) = '*' OR '?' IN (parts[3], parts[5]);
    fixed := parts[2] !~ '[*/]';
    repeat := CASE WHEN NOT fixed
                     OR (SELECT count(DISTINCT x) FROM unnest(mi) x) * (SELECT count(DISTINCT x) FROM unnest(sec) x) > 1
                   THEN 'both' ELSE dst_repeat END;
    FOR i IN 1 .. coalesce(array_length(times, 1), 0) LOOP
        t := times[i];
        IF t IS NULL OR date_trunc('second', t) <> t THEN
            RETURN i;
        END IF;
        w := t AT TIME ZONE tz;
        off := agentlab_sched._zone_offset(t, tz);
        due := extract(second FROM w)::int = ANY (sec) AND extract(minute FROM w)::int = ANY (mi)
            AND extract(hour FROM w)::int = ANY (hr) AND extract(month FROM w)::int = ANY (mon)
            AND (yr IS NULL OR extract(year FROM w)::int = ANY (yr))
            AND agentlab_sched._cron_day_matches(w::date, dom, dom_last, lw, near, dow, dow_last, nth, day_and);
        IF due AND repeat <> 'both' THEN
            -- In a repeated hour, a fixed time fires at its first or its last occurrence only.
            other := NULL;
            FOREACH o IN ARRAY ARRAY[agentlab_sched._zone_offset(t - interval '1 day', tz),
                                     agentlab_sched._zone_offset(t + interval '1 day', tz)] LOOP
                c := t + (off - o);
                IF c <> t AND (c AT TIME ZONE tz) = w THEN
                    other := c;
                END IF;
            END LOOP;
            due := other IS NULL OR (repeat = 'first' AND other > t) OR (repeat = 'last' AND other < t);
        END IF;
        IF NOT due AND fixed AND dst_gap = 'shift' THEN
            -- The instant a DST gap ends fires for the fixed times the gap skipped.
            o := agentlab_sched._zone_offset(t - interval '1 second', tz);
            IF o < off THEN
                due := EXISTS (
                    SELECT 1
                    FROM generate_series(date_trunc('day', w - (off - o)), date_trunc('day', w), interval '1 day') dd(day)
                    CROSS JOIN unnest(hr) h CROSS JOIN unnest(mi) mm CROSS JOIN unnest(sec) ss
                    WHERE dd.day + make_interval(hours => h, mins => mm, secs => ss) >= w - (off - o)
                      AND dd.day + make_interval(hours => h, mins => mm, secs => ss) < w
                      AND extract(month FROM dd.day)::int = ANY (mon)
                      AND (yr IS NULL OR extract(year FROM dd.day)::int = ANY (yr))
                      AND agentlab_sched._cron_day_matches(dd.day::date, dom, dom_last, lw, near, dow, dow_last,
                                                           nth, day_and));
            END IF;
        END IF;
        IF NOT due THEN
            RETURN i;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
