-- Schedules, the SQL admin API: find_schedule (lock the schedule or say it does not exist), schedule,
-- alter_schedule, unschedule, pause, resume, mark_imported. Reference: docs/sql.md. The checks are in
-- 26_schedule_fields.sql, the triggers in 27_schedule_write.sql. Re-applied by every migrate (CREATE OR
-- REPLACE): a function whose arguments change is dropped first, or the old one stays as an overload.

-- The schedule called `name`, locked as `lock` says ('update', 'no key update'; NULL: not locked), or
-- schedule.not_found naming it: what every function that acts on a schedule by name starts with.
CREATE OR REPLACE FUNCTION agentlab_sched.find_schedule(name text, lock text DEFAULT NULL)
RETURNS agentlab_sched.schedules
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s agentlab_sched.schedules;
BEGIN
    IF lock = 'update' THEN
        SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = find_schedule.name FOR UPDATE;
    ELSIF lock = 'no key update' THEN
        SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = find_schedule.name FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = find_schedule.name;
    END IF;
    IF NOT FOUND THEN
        PERFORM agentlab_sched.fail('schedule.not_found', 'name', jsonb_build_object('name', find_schedule.name));
    END IF;
    RETURN s;
END
$$;

-- alter_schedule(): change some fields of a schedule; NULL leaves a field as it is.
CREATE OR REPLACE FUNCTION agentlab_sched.alter_schedule(
    name text,
    cron text DEFAULT NULL,
    timezone text DEFAULT NULL,
    task text DEFAULT NULL,
    inputs jsonb DEFAULT NULL,
    enabled boolean DEFAULT NULL,
    overlap text DEFAULT NULL,
    misfire_grace interval DEFAULT NULL,
    timeout interval DEFAULT NULL,
    queue text DEFAULT NULL,
    priority integer DEFAULT NULL,
    catchup text DEFAULT NULL,
    max_catchup integer DEFAULT NULL,
    starts_at timestamptz DEFAULT NULL,
    ends_at timestamptz DEFAULT NULL,
    remaining_runs integer DEFAULT NULL,
    pause_after_failures integer DEFAULT NULL,
    context text DEFAULT NULL,
    dst_gap text DEFAULT NULL,
    dst_repeat text DEFAULT NULL,
    on_interrupt text DEFAULT NULL,
    new_name text DEFAULT NULL,
    expected_version integer DEFAULT NULL,
    clear text[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    clearable constant text[] := ARRAY(
        SELECT o.name FROM agentlab_sched.schedule_options o WHERE o.clearable ORDER BY o.position);
    -- The clearable arguments as given (a field cannot be both set and cleared).
    given jsonb := jsonb_build_object(
        'timeout', timeout, 'starts_at', starts_at, 'ends_at', ends_at,
        'remaining_runs', remaining_runs, 'pause_after_failures', pause_after_failures);
    c text;
    result integer;
    actual integer;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    FOREACH c IN ARRAY coalesce(clear, '{}'::text[]) LOOP
        IF c IS NULL OR NOT c = ANY (clearable) THEN
            PERFORM agentlab_sched.fail('schedule.clear_unknown', 'clear', jsonb_build_object(
                'value', coalesce(c, ''), 'allowed', to_jsonb(clearable)));
        END IF;
        IF jsonb_typeof(given -> c) <> 'null' THEN
            PERFORM agentlab_sched.fail('schedule.clear_conflict', c,
                                        jsonb_build_object('field', agentlab_sched.field_term(c)));
        END IF;
    END LOOP;
    IF new_name IS NOT NULL AND new_name IS DISTINCT FROM name
       AND EXISTS (SELECT FROM agentlab_sched.schedules s WHERE s.name = new_name) THEN
        PERFORM agentlab_sched.fail('schedule.name_taken', 'new_name',
                                    jsonb_build_object('name', new_name));
    END IF;

    -- The optimistic lock is this conditional UPDATE: of two sessions altering at once with the same
    -- expected_version, the second waits for the first's row lock, re-checks the condition against the
    -- committed row and matches nothing.
    UPDATE agentlab_sched.schedules AS s SET
        name = coalesce(new_name, s.name),
        cron = coalesce(cron, s.cron),
        timezone = coalesce(timezone, s.timezone),
        task = coalesce(task, s.task),
        inputs = coalesce(inputs, s.inputs),
        enabled = coalesce(enabled, s.enabled),
        overlap = coalesce(overlap, s.overlap),
        misfire_grace = coalesce(misfire_grace, s.misfire_grace),
        timeout = CASE WHEN 'timeout' = ANY (clear) THEN NULL ELSE coalesce(timeout, s.timeout) END,
        queue = coalesce(queue, s.queue),
        priority = coalesce(priority, s.priority),
        catchup = coalesce(catchup, s.catchup),
        max_catchup = coalesce(max_catchup, s.max_catchup),
        starts_at = CASE WHEN 'starts_at' = ANY (clear) THEN NULL ELSE coalesce(starts_at, s.starts_at) END,
        ends_at = CASE WHEN 'ends_at' = ANY (clear) THEN NULL ELSE coalesce(ends_at, s.ends_at) END,
        remaining_runs = CASE WHEN 'remaining_runs' = ANY (clear) THEN NULL
                              ELSE coalesce(remaining_runs, s.remaining_runs) END,
        pause_after_failures = CASE WHEN 'pause_after_failures' = ANY (clear) THEN NULL
                                    ELSE coalesce(pause_after_failures, s.pause_after_failures) END,
        context = coalesce(context, s.context),
        dst_gap = coalesce(dst_gap, s.dst_gap),
        dst_repeat = coalesce(dst_repeat, s.dst_repeat),
        on_interrupt = coalesce(on_interrupt, s.on_interrupt)
    WHERE s.name = name AND (expected_version IS NULL OR s.version = expected_version)
    RETURNING s.version INTO result;
    IF FOUND THEN
        RETURN result;
    END IF;
    actual := (agentlab_sched.find_schedule(name)).version;
    PERFORM agentlab_sched.fail('schedule.stale_version', 'expected_version', jsonb_build_object(
        'name', name, 'expected', expected_version, 'actual', actual));
    RETURN NULL;
END
$$;

-- schedule(): create the schedule of that name, or update it (as pg_cron's cron.schedule does).
-- name, cron, task, inputs and timezone are always set from the call; the other arguments, when NULL,
-- take the column default on create and leave the field as it is on update (a paused schedule stays
-- paused when a deploy script declares it again). With if_exists => 'error', an existing name is refused
-- (schedule.name_taken, SQLSTATE 23505) instead: create only.
CREATE OR REPLACE FUNCTION agentlab_sched.schedule(
    name text,
    cron text,
    task text,
    inputs jsonb DEFAULT '{}'::jsonb,
    timezone text DEFAULT 'UTC',
    queue text DEFAULT NULL,
    priority integer DEFAULT NULL,
    overlap text DEFAULT NULL,
    misfire_grace interval DEFAULT NULL,
    timeout interval DEFAULT NULL,
    enabled boolean DEFAULT NULL,
    catchup text DEFAULT NULL,
    max_catchup integer DEFAULT NULL,
    starts_at timestamptz DEFAULT NULL,
    ends_at timestamptz DEFAULT NULL,
    remaining_runs integer DEFAULT NULL,
    pause_after_failures integer DEFAULT NULL,
    context text DEFAULT NULL,
    dst_gap text DEFAULT NULL,
    dst_repeat text DEFAULT NULL,
    on_interrupt text DEFAULT NULL,
    if_exists text DEFAULT 'update')
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sid bigint;
    d agentlab_sched.schedules;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    PERFORM agentlab_sched.validate_choice('if_exists', if_exists, ARRAY['update', 'error']);
    -- The arguments the call always sets must be given: NULL would mean "unchanged" in alter_schedule.
    -- (Their values are checked by the trigger, cron and time zone by check_cron / check_timezone.)
    IF cron IS NULL THEN
        PERFORM agentlab_sched.validate_text('cron', NULL, 0);
    END IF;
    PERFORM agentlab_sched.validate_text('task', task, 200, true, true);
    IF inputs IS NULL THEN
        PERFORM agentlab_sched.validate_text('inputs', NULL, 0);
    END IF;
    IF timezone IS NULL THEN
        PERFORM agentlab_sched.validate_text('timezone', NULL, 0);
    END IF;
    LOOP
        SELECT s.id INTO sid FROM agentlab_sched.schedules s WHERE s.name = name;
        IF FOUND AND if_exists = 'error' THEN
            PERFORM agentlab_sched.fail('schedule.name_taken', 'name', jsonb_build_object('name', name));
        END IF;
        IF FOUND THEN
            PERFORM agentlab_sched.alter_schedule(
                name, cron => cron, timezone => timezone, task => task, inputs => inputs,
                enabled => enabled, overlap => overlap, misfire_grace => misfire_grace, timeout => timeout,
                queue => queue, priority => priority, catchup => catchup, max_catchup => max_catchup,
                starts_at => starts_at, ends_at => ends_at, remaining_runs => remaining_runs,
                pause_after_failures => pause_after_failures, context => context, dst_gap => dst_gap,
                dst_repeat => dst_repeat, on_interrupt => on_interrupt);
            RETURN sid;
        END IF;
        -- The arguments left NULL take the option's default (schedule_options, from core/options.py).
        d := agentlab_sched.option_defaults();
        INSERT INTO agentlab_sched.schedules AS s
            (name, cron, task, inputs, timezone, queue, priority, overlap, misfire_grace, timeout, enabled,
             catchup, max_catchup, starts_at, ends_at, remaining_runs, pause_after_failures, context, dst_gap,
             dst_repeat, on_interrupt)
        VALUES (name, cron, task, inputs, timezone, coalesce(queue, d.queue), coalesce(priority, d.priority),
                coalesce(overlap, d.overlap), coalesce(misfire_grace, d.misfire_grace),
                coalesce(timeout, d.timeout), coalesce(enabled, d.enabled), coalesce(catchup, d.catchup),
                coalesce(max_catchup, d.max_catchup), coalesce(starts_at, d.starts_at),
                coalesce(ends_at, d.ends_at), coalesce(remaining_runs, d.remaining_runs),
                coalesce(pause_after_failures, d.pause_after_failures), coalesce(context, d.context),
                coalesce(dst_gap, d.dst_gap), coalesce(dst_repeat, d.dst_repeat),
                coalesce(on_interrupt, d.on_interrupt))
        ON CONFLICT ON CONSTRAINT schedules_name_key DO NOTHING
        RETURNING s.id INTO sid;
        IF sid IS NOT NULL THEN
            RETURN sid;
        END IF;
        -- Created by another session meanwhile: update it instead.
    END LOOP;
END
$$;

-- unschedule(): delete the schedule (its ledger goes with it; runs stay, unlinked). False when there
-- is no schedule of that name.
CREATE OR REPLACE FUNCTION agentlab_sched.unschedule(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    DELETE FROM agentlab_sched.schedules s WHERE s.name = name;
    RETURN FOUND;
END
$$;

-- pause(): stop firing (enabled = false) and say why. True when this call paused it, false when it
-- was paused already (a reason given then replaces the old one). The row lock here and in resume() is
-- NO KEY UPDATE, the lock the UPDATE takes anyway: it does not wait for transactions that only insert
-- fires, runs or requests of the schedule, such as a trigger() whose resolver is still answering.
CREATE OR REPLACE FUNCTION agentlab_sched.pause(name text, reason text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was_enabled boolean;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    was_enabled := (agentlab_sched.find_schedule(name, 'no key update')).enabled;
    UPDATE agentlab_sched.schedules s
    SET enabled = false,
        paused_reason = CASE WHEN was_enabled THEN reason ELSE coalesce(reason, s.paused_reason) END,
        paused_reason_code = CASE WHEN was_enabled OR reason IS NOT NULL THEN NULL ELSE s.paused_reason_code END,
        paused_reason_params = CASE WHEN was_enabled OR reason IS NOT NULL THEN NULL ELSE s.paused_reason_params END
    WHERE s.name = name;
    RETURN was_enabled;
END
$$;

-- pause() with the system's reason: message `code` with `params`, rendered when read in the reader's
-- language (an import pausing what it made). True when this call paused it.
CREATE OR REPLACE FUNCTION agentlab_sched.pause_because(name text, code text, params jsonb DEFAULT '{}'::jsonb)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was_enabled boolean;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    PERFORM agentlab_sched.validate_text('code', code, 200);
    was_enabled := (agentlab_sched.find_schedule(name, 'no key update')).enabled;
    UPDATE agentlab_sched.schedules s
    SET enabled = false, paused_reason = NULL, paused_reason_code = code,
        paused_reason_params = coalesce(params, '{}'::jsonb)
    WHERE s.name = name;
    RETURN was_enabled;
END
$$;

-- resume(): fire again from now on: the next fire is the first due time after now (the paused time is
-- never replayed); clears paused_reason and consecutive_failures. True when this call resumed it.
CREATE OR REPLACE FUNCTION agentlab_sched.resume(name text) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    was_enabled boolean;
BEGIN
    PERFORM agentlab_sched.validate_text('name', name, 200);
    was_enabled := (agentlab_sched.find_schedule(name, 'no key update')).enabled;
    IF was_enabled THEN
        RETURN false;
    END IF;
    UPDATE agentlab_sched.schedules s SET enabled = true WHERE s.name = name;
    RETURN true;
END
$$;

-- Record where schedule `name` was imported from (`source`, how a second import recognises it), and give it
-- the overlap policy of what it replaces (`overlap`, when given). Part of the SQL API of an import.
CREATE OR REPLACE FUNCTION agentlab_sched.mark_imported(name text, source text, overlap text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM agentlab_sched.find_schedule(name, 'no key update');
    UPDATE agentlab_sched.schedules s
    SET imported_from = source, overlap = coalesce(overlap, s.overlap)
    WHERE s.name = name;
END
$$;
