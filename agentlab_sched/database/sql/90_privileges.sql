-- Privileges: who may do what (docs/security.md).

-- Why the login role `who` (the session's by default) may not create or change a schedule of the built-in
-- `sql` task that runs its command as `run_as`, or fire one with other inputs: the message code of the
-- first condition that fails, NULL when it may. It must hold EXECUTE on agentlab_sched.schedule_sql (the
-- privilege, granted by the owner) and be itself a member of `run_as` (nobody gains a role through a
-- schedule); `run_as` may be neither a superuser nor the owner of schema agentlab_sched. A `who` that is no
-- role (NULL, or a role dropped since) may not.
CREATE OR REPLACE FUNCTION agentlab_sched.sql_schedule_problem(run_as text, who text DEFAULT session_user)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target pg_catalog.pg_roles;
BEGIN
    SELECT * INTO target FROM pg_catalog.pg_roles r WHERE r.rolname = run_as;
    IF NOT FOUND THEN
        RETURN 'sql.not_allowed.no_role';
    ELSIF target.rolsuper THEN
        RETURN 'sql.not_allowed.superuser';
    ELSIF target.oid = (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'agentlab_sched') THEN
        RETURN 'sql.not_allowed.owner';
    ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles w WHERE w.rolname = who) THEN
        RETURN 'sql.not_allowed.no_user';
    ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                      WHERE p.pronamespace = 'agentlab_sched'::pg_catalog.regnamespace AND p.proname = 'schedule_sql'
                        AND pg_catalog.has_function_privilege(who, p.oid, 'EXECUTE')) THEN
        RETURN 'sql.not_allowed.no_execute';
    ELSIF NOT pg_catalog.pg_has_role(who, target.oid, 'MEMBER') THEN
        RETURN 'sql.not_allowed.not_member';
    END IF;
    RETURN NULL;
END
$$;

-- Whether `who` may (sql_schedule_problem() finds nothing).
DROP FUNCTION IF EXISTS agentlab_sched.may_schedule_sql(text);
CREATE OR REPLACE FUNCTION agentlab_sched.may_schedule_sql(run_as text, who text DEFAULT session_user)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT agentlab_sched.sql_schedule_problem(run_as, who) IS NULL
$$;

-- ------------------------------------------------------------------------------------------------
-- Roles: reader, admin, worker (docs/security.md). create_roles() makes them and records their names in
-- config (role.reader, role.admin, role.worker); apply_privileges(), run by every migrate, grants them
-- what they may do, so that a function dropped and created again keeps its grants.
-- ------------------------------------------------------------------------------------------------

-- The SECURITY DEFINER functions each role may call, by name (every overload). A definer function in
-- none of these lists is called only by PostgreSQL (a trigger) or is a privilege the owner grants by
-- hand (schedule_sql); a test holds the lists and the functions together.
CREATE OR REPLACE FUNCTION agentlab_sched.role_functions(kind text) RETURNS text[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE kind
        WHEN 'admin' THEN ARRAY[
            -- the SQL API: every change goes through validation and the audit
            'schedule', 'schedule_many', 'alter_schedule', 'unschedule', 'pause', 'pause_because', 'resume', 'trigger', 'trigger_now',
            'backfill',
            'approve', 'reject', 'resume_run', 'abandon', 'resume_suspended', 'abandon_suspended', 'cancel_run',
            'reset_session', 'prune', 'set_retention', 'ensure_partitions', 'default_partition_rows',
            'set_webhook', 'rotate_webhook', 'mark_imported',
            -- schedules defined in code: a deploy's sync (schedules/code.py)
            'begin_code_sync', 'end_code_sync', 'code_schedule_mark', 'code_schedule_gone',
            -- what the Python API and the CLI do around it: plan a changed schedule, fire a request at once
            'claim_replans', 'set_next_runs', 'label_request', 'next_request', 'carry_out_request', 'fail_request']
        WHEN 'worker' THEN ARRAY[
            -- firing: bookkeeping, the ledger, runs and their jobs; never a schedule's definition
            'claim_due', 'apply_plans', 'lease_schedules', 'apply_resolved', 'register_tasks', 'claim_replans',
            'set_next_runs',
            'next_request', 'carry_out_request', 'fail_request',
            -- running jobs (agentlab-sched worker's runner, the run middleware) and housekeeping
            'fetch_jobs', 'finish_jobs', 'run_context', 'await_approval', 'record_task_error', 'record_result', 'record_unknown_task',
            'hand_back_job', 'mark_shutdown', 'shutdown_outcome',
            'finish_after_abort', 'renew_session', 'housekeeping', 'detect_suspended', 'enforce_timeouts',
            'time_out_run', 'ensure_partitions', 'default_partition_rows',
            -- what a worker says of itself (agentlab-sched doctor reads it)
            'report_worker', 'forget_worker']
        ELSE ARRAY[]::text[]
    END
$$;

-- The tables of ours the reader may read whole (the views, the ledger, runs, the audit, ...): all but
-- the schedules (every column but the webhook ciphertext) and the internal bookkeeping.
CREATE OR REPLACE FUNCTION agentlab_sched.reader_hidden_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY['schedules', 'bookkeeping_marks', 'bot_sends']
$$;

-- The role recorded for `kind` (reader, admin, worker), when it still exists.
CREATE OR REPLACE FUNCTION agentlab_sched.configured_role(kind text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.value FROM agentlab_sched.config c
    WHERE c.key = 'role.' || kind AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = c.value)
$$;

-- EXECUTE revoked from PUBLIC on every SECURITY DEFINER function; what each recorded role may do granted.
-- Run by the owner (migrate, create_roles).
CREATE OR REPLACE FUNCTION agentlab_sched.apply_privileges() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reader text := agentlab_sched.configured_role('reader');
    admin text := agentlab_sched.configured_role('admin');
    worker text := agentlab_sched.configured_role('worker');
    f record;
    t record;
    visible text;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS sig, p.proname FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'agentlab_sched'::regnamespace AND p.prosecdef LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.sig);
        IF admin IS NOT NULL AND f.proname = ANY (agentlab_sched.role_functions('admin')) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f.sig, admin);
        END IF;
        IF worker IS NOT NULL AND f.proname = ANY (agentlab_sched.role_functions('worker')) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f.sig, worker);
        END IF;
    END LOOP;

    -- Reading: the reader, and (through membership of the reader, see create_roles) admin and worker.
    IF reader IS NOT NULL THEN
        EXECUTE format('GRANT USAGE ON SCHEMA agentlab_sched TO %I', reader);
        FOR t IN SELECT c.relname FROM pg_catalog.pg_class c
                 WHERE c.relnamespace = 'agentlab_sched'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p')
                   AND c.relname <> ALL (agentlab_sched.reader_hidden_tables()) LOOP
            EXECUTE format('GRANT SELECT ON agentlab_sched.%I TO %I', t.relname, reader);
        END LOOP;
        SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO visible
        FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = 'agentlab_sched.schedules'::regclass AND a.attnum > 0 AND NOT a.attisdropped
          AND a.attname NOT IN ('webhook_url_enc', 'webhook_secret_enc');
        EXECUTE format('GRANT SELECT (%s) ON agentlab_sched.schedules TO %I', visible, reader);
        EXECUTE format('GRANT SELECT ON public.procrastinate_jobs, public.procrastinate_workers TO %I', reader);
        -- pg_cron's monitoring views, in every compatibility schema migrate made (install_cron_compat).
        FOR t IN SELECT n.nspname FROM pg_catalog.pg_namespace n
                 WHERE agentlab_sched.is_cron_compat_schema(n.oid) LOOP
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', t.nspname, reader);
            EXECUTE format('GRANT SELECT ON %I.job, %I.job_run_details TO %I', t.nspname, t.nspname, reader);
        END LOOP;
    END IF;

    -- The admin and the worker read the ciphertext (with the key, notify test and the dispatcher open it).
    IF admin IS NOT NULL THEN
        EXECUTE format('GRANT USAGE ON SCHEMA agentlab_sched TO %I', admin);
        EXECUTE format('GRANT SELECT ON agentlab_sched.schedules TO %I', admin);
    END IF;
    IF worker IS NOT NULL THEN
        EXECUTE format('GRANT USAGE ON SCHEMA agentlab_sched TO %I', worker);
        EXECUTE format('GRANT SELECT ON agentlab_sched.schedules TO %I', worker);
        -- The notification outbox is the dispatcher's bookkeeping.
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON agentlab_sched.outbox, agentlab_sched.deliveries, '
                       'agentlab_sched.bot_sends TO %I', worker);
        -- Procrastinate's tables and functions, as any Procrastinate worker needs them.
        EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', worker);
        FOR t IN SELECT c.relname, c.relkind FROM pg_catalog.pg_class c
                 WHERE c.relnamespace = 'public'::regnamespace AND c.relname LIKE 'procrastinate\_%'
                   AND c.relkind IN ('r', 'p', 'v', 'S') LOOP
            IF t.relkind = 'S' THEN
                EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE public.%I TO %I', t.relname, worker);
            ELSE
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO %I', t.relname, worker);
            END IF;
        END LOOP;
        FOR f IN SELECT p.oid::regprocedure AS sig FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'procrastinate\_%' LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f.sig, worker);
        END LOOP;
    END IF;
END
$$;

-- Create the three roles (NOLOGIN group roles; give them to login roles) unless they exist, record their
-- names, make admin and worker members of reader, and grant. Idempotent. Run as the owner, with the
-- right to create roles. Returns {"created": [...], "existing": [...]}.
CREATE OR REPLACE FUNCTION agentlab_sched.create_roles(reader text, admin text, worker text) RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kinds text[] := ARRAY['reader', 'admin', 'worker'];
    names text[] := ARRAY[reader, admin, worker];
    created text[] := '{}';
    existing text[] := '{}';
    r pg_catalog.pg_roles;
BEGIN
    -- The owner's to do: checked first, so that a caller without the right is told so whether or not the
    -- roles already exist (another install in the cluster may have made them), not refused halfway.
    IF NOT (SELECT u.rolsuper FROM pg_catalog.pg_roles u WHERE u.rolname = current_user)
       AND NOT pg_catalog.pg_has_role(current_user,
                   (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'agentlab_sched'), 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', MESSAGE = 'permission denied to create role',
            DETAIL = 'create_roles is run by the owner of schema agentlab_sched';
    END IF;
    FOR i IN 1 .. 3 LOOP
        PERFORM agentlab_sched.validate_text(kinds[i], names[i], 63, true, true);
    END LOOP;
    IF reader = admin OR reader = worker OR admin = worker THEN
        PERFORM agentlab_sched.fail('roles.same_name', 'reader', jsonb_build_object(
            'reader', reader, 'admin', admin, 'worker', worker));
    END IF;
    FOR i IN 1 .. 3 LOOP
        SELECT * INTO r FROM pg_catalog.pg_roles x WHERE x.rolname = names[i];
        IF NOT FOUND THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', names[i]);
            created := created || names[i];
        ELSIF r.rolsuper
              OR r.oid = (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'agentlab_sched') THEN
            -- A role worth more than what it would be given: refuse rather than pretend to limit it.
            PERFORM agentlab_sched.fail('roles.too_powerful', kinds[i], jsonb_build_object(
                'field', agentlab_sched.field_term(kinds[i]), 'name', names[i]));
        ELSE
            existing := existing || names[i];
        END IF;
        INSERT INTO agentlab_sched.config (key, value) VALUES ('role.' || kinds[i], names[i])
        ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    END LOOP;
    IF NOT pg_catalog.pg_has_role(admin, reader, 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', reader, admin);
    END IF;
    IF NOT pg_catalog.pg_has_role(worker, reader, 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', reader, worker);
    END IF;
    PERFORM agentlab_sched.apply_privileges();
    RETURN jsonb_build_object('created', to_jsonb(created), 'existing', to_jsonb(existing));
END
$$;

-- Procrastinate's functions (and trigger functions) use unqualified names and set no search_path: pinned
-- to Procrastinate's schema, so that they work when called from our functions (whose path is
-- pg_catalog, pg_temp) and never see objects planted in pg_temp. public must not be writable by untrusted
-- roles (docs/security.md; doctor checks). Re-applied at every migrate: Procrastinate's migrations
-- replace its functions. Functions this role does not own are left (doctor says so).
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) AS args
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'procrastinate\_%'
               AND pg_catalog.pg_has_role(current_user, p.proowner, 'USAGE') LOOP
        EXECUTE format('ALTER FUNCTION public.%I(%s) SET search_path = pg_catalog, public, pg_temp', f.proname, f.args);
    END LOOP;
END
$$;

SELECT agentlab_sched.apply_privileges();
