-- Schedules defined in code (schedules/code.py, docs/coming-from.md "Schedules as code"): the functions a
-- sync calls, in one transaction. begin_code_sync() serialises syncs, records the deployment and leaves
-- the transaction's mark that lets the validation trigger accept changes of what the code defines;
-- end_code_sync() takes the mark away again.

-- Whether this transaction is a code sync (its mark is there).
CREATE OR REPLACE FUNCTION agentlab_sched.in_code_sync() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM agentlab_sched.bookkeeping_marks m
                   WHERE m.xact = pg_catalog.pg_current_xact_id() AND m.schedule_id = 0 AND m.kind = 'code_sync')
$$;

-- Whether a row version (its xmin) was written by this transaction (or one of its subtransactions): a
-- visible row whose transaction is still in progress can only be ours.
CREATE OR REPLACE FUNCTION agentlab_sched.written_here(x xid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_xact_status(((c - c % 4294967296) + x::text::bigint)::text::xid8) = 'in progress'
    FROM (SELECT pg_catalog.pg_current_xact_id()::text::bigint AS c) t
$$;

-- The deployment this transaction's sync began (begin_code_sync wrote its row), NULL when none.
CREATE OR REPLACE FUNCTION agentlab_sched.syncing_deployment() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT d.fingerprint FROM agentlab_sched.code_deployments d
    WHERE agentlab_sched.in_code_sync() AND agentlab_sched.written_here(d.xmin)
    ORDER BY d.last_seen_at DESC LIMIT 1
$$;

-- Whether this transaction changed the definition of schedule `sid` (an audit row: insert, or update
-- when `created` is false). A sync stamps only what it wrote. PL/pgSQL: on Citus, where the audit is
-- distributed, a SQL-language function's parameters cannot be planned; the query goes to the audit
-- shard of `sid` whole, on the connection of this transaction that wrote the row there.
CREATE OR REPLACE FUNCTION agentlab_sched.defined_here(sid bigint, created boolean) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM agentlab_sched.schedule_changes c
                   WHERE c.schedule_id = sid AND agentlab_sched.written_here(c.xmin)
                     AND (c.operation = 'insert' OR (NOT created AND c.operation = 'update')));
END
$$;

-- Start a sync by deployment `fingerprint` (declaring `schedules` for `tasks`): first seen now unless seen
-- before (now again with `adopt`). When it was first seen.
-- One sync at a time: a lock on code_deployments that only the owner's functions can take (a role with
-- only CONNECT, or the reader, cannot: an advisory lock is anyone's), waited for at most 10 s, then
-- refused naming who holds it (code.sync_locked).
CREATE OR REPLACE FUNCTION agentlab_sched.begin_code_sync(fingerprint text, tasks text[], schedules text[],
                                                         adopt boolean DEFAULT false)
RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    first timestamptz;
    holder text;
    seen timestamptz;
    was text := pg_catalog.current_setting('lock_timeout');
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', '10s', true);
        LOCK TABLE agentlab_sched.code_deployments IN EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        SELECT string_agg(format('pid %s (%s, %s, since %s)', a.pid, a.usename, nullif(a.application_name, ''),
                                 to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"')),
                          ', ' ORDER BY a.pid)
        INTO holder
        FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
        WHERE l.relation = 'agentlab_sched.code_deployments'::pg_catalog.regclass AND l.granted
          AND l.mode <> 'AccessShareLock' AND l.pid <> pg_catalog.pg_backend_pid();
        PERFORM agentlab_sched.fail('code.sync_locked', 'app', jsonb_build_object('holder', coalesce(holder, '?')));
    END;
    PERFORM pg_catalog.set_config('lock_timeout', was, true);
    -- The time a value, not a call in DO UPDATE: Citus (code_deployments a reference table) refuses a
    -- function that is not IMMUTABLE there.
    seen := pg_catalog.clock_timestamp();
    INSERT INTO agentlab_sched.code_deployments AS d (fingerprint, tasks, schedules, first_seen_at, last_seen_at)
    VALUES (fingerprint, coalesce(tasks, '{}'), coalesce(schedules, '{}'), seen, seen)
    ON CONFLICT ON CONSTRAINT code_deployments_pkey DO UPDATE
    SET last_seen_at = seen, tasks = excluded.tasks, schedules = excluded.schedules,
        first_seen_at = CASE WHEN adopt THEN seen ELSE d.first_seen_at END
    RETURNING d.first_seen_at INTO first;
    INSERT INTO agentlab_sched.bookkeeping_marks (schedule_id, kind) VALUES (0, 'code_sync')
    ON CONFLICT DO NOTHING;
    RETURN first;
END
$$;

-- End the sync: no further change in this transaction counts as the code's.
CREATE OR REPLACE FUNCTION agentlab_sched.end_code_sync() RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM agentlab_sched.bookkeeping_marks m
    WHERE m.xact = pg_catalog.pg_current_xact_id() AND m.schedule_id = 0 AND m.kind = 'code_sync'
$$;

-- Schedule `name` is defined in code at `defined_in`, last written by deployment `fingerprint` (a sync only,
-- of that deployment). A schedule made by hand is never taken over: only one this transaction created
-- is marked; and `code_version` (which deployment wins it: schedules/code.py) moves only when this
-- transaction changed its definition or where it is defined, so declaring a schedule is not enough for
-- a deployment to claim it.
CREATE OR REPLACE FUNCTION agentlab_sched.code_schedule_mark(name text, defined_in text, fingerprint text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    s agentlab_sched.schedules;
BEGIN
    IF agentlab_sched.syncing_deployment() IS DISTINCT FROM fingerprint THEN
        PERFORM agentlab_sched.fail('code.not_syncing', 'name', jsonb_build_object('name', name));
    END IF;
    SELECT * INTO s FROM agentlab_sched.schedules x WHERE x.name = code_schedule_mark.name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF s.defined_in IS NULL AND NOT agentlab_sched.defined_here(s.id, true) THEN
        PERFORM agentlab_sched.fail('code.not_from_code', 'name', jsonb_build_object('name', name));
    END IF;
    UPDATE agentlab_sched.schedules x
    SET defined_in = code_schedule_mark.defined_in, code_removed_at = NULL,
        code_version = CASE WHEN agentlab_sched.defined_here(s.id, false)
                                  OR s.defined_in IS DISTINCT FROM code_schedule_mark.defined_in
                            THEN fingerprint ELSE x.code_version END
    WHERE x.id = s.id;
END
$$;

-- Schedule `name` is no longer declared in code: paused, saying where it was declared (code.gone, rendered
-- when read), not deleted (a sync only).
CREATE OR REPLACE FUNCTION agentlab_sched.code_schedule_gone(name text) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF NOT agentlab_sched.in_code_sync() THEN
        PERFORM agentlab_sched.fail('code.not_syncing', 'name', jsonb_build_object('name', name));
    END IF;
    -- Only a schedule code defines; stamped with the deployment that dropped it, which then wins it.
    UPDATE agentlab_sched.schedules s
    SET enabled = false, paused_reason = NULL, paused_reason_code = 'code.gone',
        paused_reason_params = jsonb_build_object('where', s.defined_in), code_removed_at = pg_catalog.clock_timestamp(),
        code_version = agentlab_sched.syncing_deployment()
    WHERE s.name = code_schedule_gone.name AND s.defined_in IS NOT NULL;
END
$$;
