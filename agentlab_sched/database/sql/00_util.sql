-- Shared helpers: the locale, message rendering, and raising errors that name the field.

-- The locale SQL renders in: the session's agentlab_sched.locale (set by our connections), else the
-- deployment's (written by migrate), else English.
CREATE OR REPLACE FUNCTION agentlab_sched.locale() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN lower(coalesce(
               nullif(current_setting('agentlab_sched.locale', true), ''),
               (SELECT value FROM agentlab_sched.config WHERE key = 'locale'),
               'en')) LIKE 'zh%' THEN 'zh-CN' ELSE 'en' END
$$;

-- Render message `code` with `params` in `loc` (the session's locale by default): the same catalogue
-- and the same {placeholder} rules as agentlab_sched.messages.render() in Python: one pass, a value is
-- never read again (a name containing "{count}" stays as it is), an unknown placeholder shows as itself.
-- With a `count` of 1, the message's singular form (`code`.one) when it has one.
CREATE OR REPLACE FUNCTION agentlab_sched.msg(code text, params jsonb DEFAULT '{}'::jsonb, loc text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lang text := coalesce(loc, agentlab_sched.locale());
    template text;
    pieces text[];
    found text[];
    result text;
    i integer := 0;
BEGIN
    IF jsonb_typeof(params) = 'object' AND params ->> 'count' = '1' THEN
        SELECT m.template INTO template FROM agentlab_sched.messages m
        WHERE m.code = msg.code || '.one' AND m.locale = lang;
    END IF;
    IF template IS NULL THEN
        SELECT m.template INTO template FROM agentlab_sched.messages m WHERE m.code = msg.code AND m.locale = lang;
    END IF;
    IF template IS NULL THEN
        RETURN code;
    END IF;
    IF position('{' IN template) = 0 THEN
        RETURN template;
    END IF;
    pieces := regexp_split_to_array(template, '\{[A-Za-z_][A-Za-z0-9_]*\}');
    result := pieces[1];
    FOR found IN SELECT regexp_matches(template, '\{([A-Za-z_][A-Za-z0-9_]*)\}', 'g') LOOP
        i := i + 1;
        result := result
            || CASE WHEN coalesce(params, '{}'::jsonb) ? found[1] THEN agentlab_sched.msg_value(params -> found[1], lang)
                    ELSE '{' || found[1] || '}' END
            || pieces[i + 1];
    END LOOP;
    RETURN result;
END
$$;

-- A duration as words, like messages.duration() in Python: "1 hour 30 minutes" / "1 小时 30 分钟".
CREATE OR REPLACE FUNCTION agentlab_sched.duration_text(seconds numeric, loc text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    left_over bigint := trunc(seconds)::bigint;
    parts text[] := '{}';
    sizes bigint[] := ARRAY[86400, 3600, 60, 1];
    one text[] := ARRAY['day', 'hour', 'minute', 'second'];
    many text[] := ARRAY['days', 'hours', 'minutes', 'seconds'];
    zh text[] := ARRAY['天', '小时', '分钟', '秒'];
    n bigint;
BEGIN
    IF left_over <= 0 THEN
        RETURN CASE WHEN loc = 'zh-CN' THEN '0 秒' ELSE '0 seconds' END;
    END IF;
    FOR i IN 1 .. 4 LOOP
        n := left_over / sizes[i];
        left_over := left_over % sizes[i];
        IF n > 0 THEN
            parts := parts || (n || ' ' || CASE WHEN loc = 'zh-CN' THEN zh[i] WHEN n = 1 THEN one[i] ELSE many[i] END);
        END IF;
    END LOOP;
    RETURN array_to_string(parts, ' ');
END
$$;

-- Message `code` with `params` as a term (like messages.term() in Python): stored instead of its text,
-- it renders in the reader's language when read (msg_value).
CREATE OR REPLACE FUNCTION agentlab_sched.term(code text, params jsonb DEFAULT '{}'::jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('msg', code, 'params', coalesce(params, '{}'::jsonb))
$$;

-- One parameter as message text: never a JSON or SQL repr (null -> "not set" / 未填写).
CREATE OR REPLACE FUNCTION agentlab_sched.msg_value(value jsonb, loc text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN value IS NULL OR jsonb_typeof(value) = 'null' THEN
            CASE WHEN loc = 'zh-CN' THEN '未填写' ELSE 'not set' END
        WHEN jsonb_typeof(value) = 'object' AND value ? 'duration' THEN
            agentlab_sched.duration_text((value ->> 'duration')::numeric, loc)
        WHEN jsonb_typeof(value) = 'object' AND value ? 'msg' THEN
            agentlab_sched.msg(value ->> 'msg', coalesce(value -> 'params', '{}'::jsonb), loc)
        WHEN jsonb_typeof(value) = 'array' THEN
            (SELECT string_agg(agentlab_sched.msg_value(e, loc), CASE WHEN loc = 'zh-CN' THEN '、' ELSE ', ' END)
             FROM jsonb_array_elements(value) AS e)
        ELSE value #>> '{}'
    END
$$;

-- Raise a refusal that names the field: the message in the session's locale, the SQLSTATE of the code in
-- the error registry (agentlab_sched.error_codes, from errors.py; 22023 for plain bad input), COLUMN = the
-- field, DETAIL = {"code", "field", "params"} so Python can rebuild it.
CREATE OR REPLACE FUNCTION agentlab_sched.fail(code text, field text, params jsonb DEFAULT '{}'::jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = agentlab_sched.msg(code, params),
        ERRCODE = coalesce((SELECT e.sqlstate FROM agentlab_sched.error_codes e WHERE e.code = fail.code), '22023'),
        COLUMN = coalesce(field, ''),
        DETAIL = jsonb_build_object('code', code, 'field', field, 'params', params)::text;
END
$$;

-- A size limit (agentlab_sched/limits.py, copied into config as limit.<name> by migrate).
CREATE OR REPLACE FUNCTION agentlab_sched.size_limit(name text) RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.value::integer FROM agentlab_sched.config c WHERE c.key = 'limit.' || name
$$;

-- A policy window (agentlab_sched/limits.py's POLICY, seconds, copied like the size limits) as an interval.
CREATE OR REPLACE FUNCTION agentlab_sched.policy_interval(name text) RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT make_interval(secs => agentlab_sched.size_limit(name))
$$;

-- Refuse a JSON value larger than the limit `limit_name` (bytes of its text), naming `field`.
CREATE OR REPLACE FUNCTION agentlab_sched.check_size(field text, value jsonb, limit_name text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    size integer := octet_length(value::text);
    most integer := agentlab_sched.size_limit(limit_name);
BEGIN
    IF size > most THEN
        PERFORM agentlab_sched.fail('schedule.too_large', field, jsonb_build_object(
            'field', jsonb_build_object('msg', 'schedule.field.' || field), 'size', size, 'max', most));
    END IF;
END
$$;

-- Who did something, in words (an approval, a request): the login role (session_user, what the database
-- records), with the name a caller gave ("alice" from `runs approve --by alice`) before it when that
-- says more.
CREATE OR REPLACE FUNCTION agentlab_sched.decider(label text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN label IS NULL OR label = session_user THEN session_user::text
                ELSE label || ' (' || session_user || ')' END
$$;

-- A LIKE pattern matching any text that contains `part`, in any case (compared with lower(column)): its
-- wildcards and escape character are matched as themselves. Immutable, so a pattern given as a value is
-- folded before planning and a trigram index can serve it.
CREATE OR REPLACE FUNCTION agentlab_sched.like_part(part text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT '%' || replace(replace(replace(lower(part), '\', '\\'), '%', '\%'), '_', '\_') || '%'
$$;
