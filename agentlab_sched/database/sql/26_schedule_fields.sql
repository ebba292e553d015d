-- Schedules, the checks every field goes through: a field's localised name, the text, choice, interval
-- and integer checks with their messages, the options' defaults (from schedule_options) and the
-- bookkeeping marks a transaction leaves for a schedule. Used by the write trigger (27_schedule_write.sql)
-- and the admin API (30_schedules.sql). Re-applied by every migrate (CREATE OR REPLACE).

-- The localised name of a field, as a message parameter (a term, see messages.term()).
CREATE OR REPLACE FUNCTION agentlab_sched.field_term(field text) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('msg', 'schedule.field.' || field)
$$;

-- Characters nobody means to put in a name: C0/C1 controls, zero-width and bidi controls, BOM.
CREATE OR REPLACE FUNCTION agentlab_sched.invisible_char_pattern() RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT '[[:cntrl:]\u0080-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2064\uFEFF]'
$$;

-- A time in a time zone as YYYY-MM-DD HH:MM (seconds shown only when not zero), as messages.local_time().
CREATE OR REPLACE FUNCTION agentlab_sched.local_time_text(at timestamptz, tz text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT to_char(at AT TIME ZONE tz,
                   CASE WHEN date_trunc('minute', at) = at THEN 'YYYY-MM-DD HH24:MI' ELSE 'YYYY-MM-DD HH24:MI:SS' END)
$$;

-- A short piece of text (a name, a queue, a task): not missing (when required), not empty, at most
-- max_length characters, no control or invisible characters, no leading or trailing spaces; with
-- one_word, no spaces at all.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_text(field text, value text, max_length integer,
                                                        required boolean DEFAULT true,
                                                        one_word boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad text;
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF value = '' THEN
        PERFORM agentlab_sched.fail('schedule.empty', field,
                                    jsonb_build_object('field', agentlab_sched.field_term(field)));
    END IF;
    IF char_length(value) > max_length THEN
        PERFORM agentlab_sched.fail('schedule.too_long', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'length', char_length(value), 'max', max_length));
    END IF;
    bad := substring(value FROM agentlab_sched.invisible_char_pattern());
    IF bad IS NOT NULL THEN
        PERFORM agentlab_sched.fail('schedule.control_char', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field),
            'position', strpos(value, bad),
            'char', 'U+' || lpad(upper(to_hex(ascii(bad))), 4, '0')));
    END IF;
    IF value ~ '^[\s\u00A0\u3000]|[\s\u00A0\u3000]$' THEN
        PERFORM agentlab_sched.fail('schedule.outer_space', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value));
    END IF;
    IF one_word AND value ~ '[\s\u00A0\u3000]' THEN
        PERFORM agentlab_sched.fail('schedule.inner_space', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value));
    END IF;
END
$$;

-- One of a fixed set of values; the message lists them.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_choice(field text, value text, allowed text[],
                                                          required boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF NOT value = ANY (allowed) THEN
        PERFORM agentlab_sched.fail('schedule.unknown_value', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field),
            'value', CASE WHEN char_length(value) > 60 THEN left(value, 60) || '…' ELSE value END,
            'allowed', to_jsonb(allowed)));
    END IF;
END
$$;

-- An interval: 0 or more, or (strictly_positive) more than 0.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_interval(field text, value interval, required boolean,
                                                            strictly_positive boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF value < interval '0' THEN
        PERFORM agentlab_sched.fail('schedule.negative', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', justify_interval(value)::text));
    END IF;
    IF strictly_positive AND value = interval '0' THEN
        PERFORM agentlab_sched.fail('schedule.not_positive', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', justify_interval(value)::text));
    END IF;
END
$$;

-- An integer within [min_value, max_value] (max_value NULL: no upper bound).
CREATE OR REPLACE FUNCTION agentlab_sched.validate_int(field text, value integer, required boolean,
                                                       min_value integer, max_value integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        IF required THEN
            PERFORM agentlab_sched.fail('schedule.required', field,
                                        jsonb_build_object('field', agentlab_sched.field_term(field)));
        END IF;
        RETURN;
    END IF;
    IF max_value IS NOT NULL AND (value < min_value OR value > max_value) THEN
        PERFORM agentlab_sched.fail('schedule.out_of_range', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value, 'min', min_value, 'max', max_value));
    END IF;
    IF value < min_value THEN
        PERFORM agentlab_sched.fail('schedule.too_small', field, jsonb_build_object(
            'field', agentlab_sched.field_term(field), 'value', value, 'min', min_value));
    END IF;
END
$$;

-- One option by its row of schedule_options; `value` as text (to_jsonb(row) ->> name), NULL = not set.
CREATE OR REPLACE FUNCTION agentlab_sched.validate_option(opt agentlab_sched.schedule_options, value text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF opt.choices IS NOT NULL THEN
        PERFORM agentlab_sched.validate_choice(opt.name, value, opt.choices, opt.required);
    ELSIF opt.sql_type = 'text' THEN
        PERFORM agentlab_sched.validate_text(opt.name, value, coalesce(opt.max_length, 1000000), opt.required,
                                             opt.one_word);
    ELSIF opt.sql_type = 'integer' THEN
        PERFORM agentlab_sched.validate_int(opt.name, value::integer, opt.required, opt.min_value, opt.max_value);
    ELSIF opt.sql_type = 'interval' THEN
        PERFORM agentlab_sched.validate_interval(opt.name, value::interval, opt.required, opt.positive);
    ELSIF value IS NULL AND opt.required THEN
        PERFORM agentlab_sched.fail('schedule.required', opt.name,
                                    jsonb_build_object('field', agentlab_sched.field_term(opt.name)));
    END IF;
END
$$;

-- The defaults of the options as a schedules row (the other columns NULL): what schedule() creates with.
CREATE OR REPLACE FUNCTION agentlab_sched.option_defaults() RETURNS agentlab_sched.schedules
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_populate_record(NULL::agentlab_sched.schedules,
                                 coalesce(jsonb_object_agg(o.name, o.default_value), '{}'::jsonb))
    FROM agentlab_sched.schedule_options o
$$;

-- Consume the bookkeeping mark of this transaction for schedule `sid` (bookkeeping_marks): true when
-- there was one.
CREATE OR REPLACE FUNCTION agentlab_sched.take_mark(sid bigint, mark text) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH taken AS (
        DELETE FROM agentlab_sched.bookkeeping_marks m
        WHERE m.xact = pg_current_xact_id() AND m.schedule_id = sid AND m.kind = mark
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM taken)
$$;

-- Whether this transaction is inside schedule_many()'s insert, whose rows it validated set-based
-- (31_bulk.sql): the write triggers then leave those rows alone. The key is this session's value of the
-- sequence bulk_insert_key, set to the transaction's id by bulk_insert_begin(): only the owner may set
-- it (a session setting alone any caller could), and reading it is no query, so that a million rows
-- are not a million look-ups. The setting is read first: for anyone else the sequence is never touched
-- (currval() would refuse them). A standard SQL body, so PostgreSQL inlines it into the triggers' WHEN.
CREATE OR REPLACE FUNCTION agentlab_sched.in_bulk_insert() RETURNS boolean
LANGUAGE sql VOLATILE
RETURN CASE WHEN pg_catalog.current_setting('agentlab_sched.bulk_insert', true) OPERATOR(pg_catalog.=) 'on'::pg_catalog.text
            THEN pg_catalog.currval('agentlab_sched.bulk_insert_key'::pg_catalog.regclass)
                 OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()::pg_catalog.text::pg_catalog.int8
            ELSE false END;

-- The start and the end of such an insert (the owner's functions only: no role is granted these). The
-- end puts the key back whatever happened: the sequence is not transactional, so a key left set by an
-- insert that failed inside a caller's savepoint would otherwise hold for the rest of the transaction.
CREATE OR REPLACE FUNCTION agentlab_sched.bulk_insert_begin() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM setval('agentlab_sched.bulk_insert_key', pg_current_xact_id()::text::bigint);
    PERFORM set_config('agentlab_sched.bulk_insert', 'on', true);
END
$$;

CREATE OR REPLACE FUNCTION agentlab_sched.bulk_insert_end() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM setval('agentlab_sched.bulk_insert_key', 0);
    PERFORM set_config('agentlab_sched.bulk_insert', '', true);
END
$$;

-- Whitespace inside a cron expression never changes its meaning: it is stored in one spelling, so that
-- "0  9 * * *" is not a change of "0 9 * * *" (the separators are the ASCII whitespace the cron parsers
-- split on).
CREATE OR REPLACE FUNCTION agentlab_sched.cron_spelling(cron text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT regexp_replace(btrim(cron, E' \t\r\n\f\x0B'), '[ \t\r\n\f\v]+', ' ', 'g')
$$;

-- A new schedule's bookkeeping, as it is stored: version 1; a disabled one has nothing pending and is
-- paused from now; an enabled one is planned after the moment it was created, not after the tick that
-- plans it. The write trigger applies it to each insert, schedule_many() to each distinct definition.
CREATE OR REPLACE FUNCTION agentlab_sched.inserted_schedule(n agentlab_sched.schedules)
RETURNS agentlab_sched.schedules
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    n.version := 1;
    IF NOT n.enabled THEN
        n.next_run_at := NULL;
        n.replan := NULL;
        n.paused_at := coalesce(n.paused_at, now());
    END IF;
    IF n.replan IS NOT NULL THEN
        n.replan_at := coalesce(n.replan_at, clock_timestamp());
    END IF;
    RETURN n;
END
$$;

-- Why a schedule is paused, in the session's language: the system's reason (a message code and its
-- parameters) rendered now, else the words a person gave.
CREATE OR REPLACE FUNCTION agentlab_sched.paused_reason_text(reason text, code text, params jsonb) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN code IS NOT NULL THEN agentlab_sched.msg(code, coalesce(params, '{}'::jsonb)) ELSE reason END
$$;
