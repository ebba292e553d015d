-- The built-in sql task (docs/sql.md, "schedule_sql"): a schedule whose job runs a SQL command in a named
-- database of this server, as a named role, under a statement timeout. Its inputs are
-- {"command", "database", "username", "statement_timeout"}; the worker's task is
-- agentlab_sched/tasks/sql.py. Who may create one: docs/security.md ("The sql task privilege").

-- The name of the task (agentlab_sched.tasks.sql.SQL_TASK: the blueprint's "sql" in namespace
-- agentlab_sched; a test holds the two together).
CREATE OR REPLACE FUNCTION agentlab_sched.sql_task_name() RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'agentlab_sched:sql'
$$;

-- Check the inputs of a schedule (or of a manual fire) whose task is `task`: nothing for other tasks;
-- for the sql task, the shape of its inputs and that the login role `who` (the session's by default; the
-- requester's when a request is carried out) may run SQL as the role named
-- (agentlab_sched.sql_schedule_problem). Raises the first problem, naming the input.
DROP FUNCTION IF EXISTS agentlab_sched.check_task_inputs(text, jsonb);
CREATE OR REPLACE FUNCTION agentlab_sched.check_task_inputs(task text, inputs jsonb, who text DEFAULT session_user)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key text;
    value jsonb;
    timeout interval;
    why text;
BEGIN
    IF task IS DISTINCT FROM agentlab_sched.sql_task_name() OR inputs IS NULL OR jsonb_typeof(inputs) <> 'object' THEN
        RETURN;
    END IF;
    FOR key IN SELECT k FROM jsonb_object_keys(inputs) AS k ORDER BY k LOOP
        IF key NOT IN ('command', 'database', 'username', 'statement_timeout') THEN
            PERFORM agentlab_sched.fail('sql.unknown_input', 'inputs', jsonb_build_object('value', key));
        END IF;
    END LOOP;
    FOREACH key IN ARRAY ARRAY['command', 'database', 'username', 'statement_timeout'] LOOP
        value := inputs -> key;
        IF value IS NULL OR jsonb_typeof(value) = 'null' THEN
            IF key <> 'statement_timeout' THEN
                PERFORM agentlab_sched.fail('schedule.required', key,
                                            jsonb_build_object('field', agentlab_sched.field_term(key)));
            END IF;
        ELSIF jsonb_typeof(value) <> 'string' THEN
            PERFORM agentlab_sched.fail('sql.not_text', key, jsonb_build_object(
                'field', agentlab_sched.field_term(key),
                'type', jsonb_build_object('msg', 'schedule.json.' || jsonb_typeof(value))));
        END IF;
    END LOOP;
    IF btrim(inputs ->> 'command', E' \t\r\n\f\x0B') = '' THEN
        PERFORM agentlab_sched.fail('schedule.empty', 'command',
                                    jsonb_build_object('field', agentlab_sched.field_term('command')));
    END IF;
    IF char_length(inputs ->> 'command') > 100000 THEN
        PERFORM agentlab_sched.fail('schedule.too_long', 'command', jsonb_build_object(
            'field', agentlab_sched.field_term('command'), 'length', char_length(inputs ->> 'command'),
            'max', 100000));
    END IF;
    PERFORM agentlab_sched.validate_text('database', inputs ->> 'database', 63);
    PERFORM agentlab_sched.validate_text('username', inputs ->> 'username', 63);
    IF inputs ? 'statement_timeout' THEN
        BEGIN
            timeout := (inputs ->> 'statement_timeout')::interval;
        EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
            timeout := NULL;
        END;
        IF timeout IS NULL OR timeout <= interval '0' OR timeout > interval '24 hours' THEN
            PERFORM agentlab_sched.fail('sql.bad_timeout', 'statement_timeout', jsonb_build_object(
                'value', inputs ->> 'statement_timeout'));
        END IF;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_database d WHERE d.datname = inputs ->> 'database') THEN
        PERFORM agentlab_sched.fail('sql.no_database', 'database', jsonb_build_object('value', inputs ->> 'database'));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = inputs ->> 'username') THEN
        PERFORM agentlab_sched.fail('sql.no_role', 'username', jsonb_build_object('value', inputs ->> 'username'));
    END IF;
    why := agentlab_sched.sql_schedule_problem(inputs ->> 'username', who);
    IF why IS NOT NULL THEN
        PERFORM agentlab_sched.fail('sql.not_allowed', 'username', jsonb_build_object(
            'value', inputs ->> 'username', 'user', coalesce(who, '?'),
            'why', jsonb_build_object('msg', why, 'params', jsonb_build_object(
                'value', inputs ->> 'username', 'user', coalesce(who, '?')))));
    END IF;
    -- The worker runs the command on a connection made as the role (tasks/sql.py): it must be able to log
    -- in, and it and the author must be allowed into the database (the connection enforces it again).
    IF NOT (SELECT r.rolcanlogin FROM pg_catalog.pg_roles r WHERE r.rolname = inputs ->> 'username') THEN
        PERFORM agentlab_sched.fail('sql.cannot_login', 'username', jsonb_build_object('value', inputs ->> 'username'));
    END IF;
    IF NOT pg_catalog.has_database_privilege(who, inputs ->> 'database', 'CONNECT') THEN
        PERFORM agentlab_sched.fail('sql.no_connect', 'database', jsonb_build_object(
            'value', inputs ->> 'database', 'who', who));
    END IF;
    IF NOT pg_catalog.has_database_privilege(inputs ->> 'username', inputs ->> 'database', 'CONNECT') THEN
        PERFORM agentlab_sched.fail('sql.no_connect', 'database', jsonb_build_object(
            'value', inputs ->> 'database', 'who', inputs ->> 'username'));
    END IF;
END
$$;

-- schedule_sql(): create or update the schedule `name` that runs `command` in `database` (default: this
-- one) as `username` (default: the session's login role) under `statement_timeout`, as pg_cron's
-- cron.schedule_in_database. Its id. The privilege to call it is granted by the owner
-- (docs/security.md); the validation trigger checks the same on every other path.
CREATE OR REPLACE FUNCTION agentlab_sched.schedule_sql(
    name text,
    cron text,
    command text,
    database text DEFAULT NULL,
    username text DEFAULT NULL,
    timezone text DEFAULT 'UTC',
    statement_timeout interval DEFAULT interval '1 hour',
    enabled boolean DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    RETURN agentlab_sched.schedule(
        name => name,
        cron => cron,
        task => agentlab_sched.sql_task_name(),
        inputs => jsonb_strip_nulls(jsonb_build_object(
            'command', command,
            'database', coalesce(database, current_database()::text),
            'username', coalesce(username, session_user::text),
            'statement_timeout', coalesce(statement_timeout, interval '1 hour')::text)),
        timezone => timezone,
        enabled => enabled);
END
$$;

REVOKE EXECUTE ON FUNCTION agentlab_sched.schedule_sql(text, text, text, text, text, text, interval, boolean) FROM PUBLIC;

-- The command of a sql fire with its {{ schedule.x }} placeholders rendered so that no value can change
-- what the SQL says (a schedule's name is anyone's to change who may rename it). Where a placeholder
-- stands in the SQL itself, its value becomes a SQL literal (quote_literal: `WHERE day =
-- {{ schedule.date }}` reads `WHERE day = '2026-03-01'`). Inside a quoted string, a quoted identifier, a
-- dollar-quoted body or a comment (`'{{ schedule.date }}'`, as pg_cron users write it) the value is put
-- as it is, and refused when it holds a character that could end that text (' " \ $, a line break, /* or
-- */). The command is read as PostgreSQL's lexer reads it: '...' ('' inside), E'...' (\ escapes; every
-- string when the command mentions standard_conforming_strings), "...", $tag$...$tag$, -- and nested
-- /* */ comments.
CREATE OR REPLACE FUNCTION agentlab_sched.render_sql_command(command text, vals jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET plan_cache_mode = auto
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    chars text[];
    n integer;
    i integer := 1;
    j integer;
    copied integer := 1;
    result text := '';
    ctx text := 'code';  -- code, string, estring, ident, dollar, line, block
    tag text;
    depth integer := 0;
    c text;
    key text;
    v text;
    backslashes boolean := command ~* 'standard_conforming_strings';
BEGIN
    IF command IS NULL OR position('{{' IN command) = 0 THEN
        RETURN command;
    END IF;
    chars := string_to_array(command, NULL);
    n := coalesce(array_length(chars, 1), 0);
    WHILE i <= n LOOP
        c := chars[i];
        IF c = '{' AND i < n AND chars[i + 1] = '{' THEN
            j := i + 2;
            WHILE j < n AND NOT (chars[j] = '}' AND chars[j + 1] = '}') LOOP
                j := j + 1;
            END LOOP;
            IF j < n THEN
                key := btrim(array_to_string(chars[i + 2 : j - 1], ''), E' \t\r\n');
                v := vals ->> key;
                IF v IS NULL THEN
                    PERFORM agentlab_sched.fail('inputs.unknown_placeholder', 'inputs', jsonb_build_object(
                        'placeholder', array_to_string(chars[i : j + 1], ''),
                        'known', (SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(vals) AS k
                                  WHERE k LIKE 'schedule.%')));
                END IF;
                IF ctx = 'code' THEN
                    v := quote_literal(v);
                ELSIF v ~ '[''"\\$\r\n]' OR position('/*' IN v) > 0 OR position('*/' IN v) > 0 THEN
                    PERFORM agentlab_sched.fail('sql.unsafe_value', 'command', jsonb_build_object(
                        'placeholder', '{{ ' || key || ' }}'));
                END IF;
                result := result || array_to_string(chars[copied : i - 1], '') || v;
                i := j + 2;
                copied := i;
                CONTINUE;
            END IF;
        END IF;
        IF ctx = 'code' THEN
            IF c = '''' THEN
                IF backslashes OR (i > 1 AND lower(chars[i - 1]) = 'e'
                                   AND (i = 2 OR chars[i - 2] !~ '[[:alnum:]_$]')) THEN
                    ctx := 'estring';
                ELSE
                    ctx := 'string';
                END IF;
            ELSIF c = '"' THEN
                ctx := 'ident';
            ELSIF c = '-' AND i < n AND chars[i + 1] = '-' THEN
                ctx := 'line';
                i := i + 1;
            ELSIF c = '/' AND i < n AND chars[i + 1] = '*' THEN
                ctx := 'block';
                depth := 1;
                i := i + 1;
            ELSIF c = '$' AND (i = 1 OR chars[i - 1] !~ '[[:alnum:]_$]') THEN
                tag := substring(array_to_string(chars[i : least(n, i + 64)], '') FROM '^\$([[:alpha:]_][[:alnum:]_]*)?\$');
                IF tag IS NOT NULL OR (i < n AND chars[i + 1] = '$') THEN
                    tag := '$' || coalesce(tag, '') || '$';
                    ctx := 'dollar';
                    i := i + length(tag) - 1;
                END IF;
            END IF;
        ELSIF ctx = 'string' OR ctx = 'ident' THEN
            IF (ctx = 'string' AND c = '''') OR (ctx = 'ident' AND c = '"') THEN
                IF i < n AND chars[i + 1] = c THEN
                    i := i + 1;  -- a doubled quote stays inside
                ELSE
                    ctx := 'code';
                END IF;
            END IF;
        ELSIF ctx = 'estring' THEN
            IF c = '\' THEN
                i := i + 1;
            ELSIF c = '''' THEN
                IF i < n AND chars[i + 1] = '''' THEN
                    i := i + 1;
                ELSE
                    ctx := 'code';
                END IF;
            END IF;
        ELSIF ctx = 'dollar' THEN
            IF c = '$' AND array_to_string(chars[i : i + length(tag) - 1], '') = tag THEN
                ctx := 'code';
                i := i + length(tag) - 1;
            END IF;
        ELSIF ctx = 'line' THEN
            IF c = E'\n' OR c = E'\r' THEN
                ctx := 'code';
            END IF;
        ELSIF ctx = 'block' THEN
            IF c = '*' AND i < n AND chars[i + 1] = '/' THEN
                depth := depth - 1;
                i := i + 1;
                IF depth = 0 THEN
                    ctx := 'code';
                END IF;
            ELSIF c = '/' AND i < n AND chars[i + 1] = '*' THEN
                depth := depth + 1;
                i := i + 1;
            END IF;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN result || array_to_string(chars[copied : n], '');
END
$$;

-- The inputs of a fire of `task` rendered from `template` (render_inputs), the sql task's command by
-- render_sql_command so that its placeholders are SQL literals.
CREATE OR REPLACE FUNCTION agentlab_sched.render_task_inputs(task text, template jsonb, fire_at timestamptz,
                                                             tz text, name text, kind text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF task IS DISTINCT FROM agentlab_sched.sql_task_name() OR jsonb_typeof(template -> 'command') <> 'string'
       OR position('{{' IN template ->> 'command') = 0 THEN
        RETURN agentlab_sched.render_inputs(template, fire_at, tz, name, kind);
    END IF;
    RETURN agentlab_sched.render_inputs(template - 'command', fire_at, tz, name, kind)
           || jsonb_build_object('command', agentlab_sched.render_sql_command(
                  template ->> 'command', agentlab_sched.template_values(fire_at, tz, name, kind)));
END
$$;
