-- Rendering inputs: the values a fire's template may use ({{ schedule.date }}, ...) and the rendering of
-- a schedule's inputs for one fire (docs/sql.md, "Inputs"); check_inputs refuses a template the renderer
-- does not know when a schedule is saved.

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
        'schedule.kind', kind,
        -- {{ '{{' }} writes two braces: how text that must not be a placeholder is written (imports).
        '''{{''', '{{')
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
            'known', (SELECT jsonb_agg(key ORDER BY key)  -- the values (not the way of writing braces)
                      FROM jsonb_object_keys(agentlab_sched.template_values(fire_at, tz, name, kind)) AS key
                      WHERE key LIKE 'schedule.%')));
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
