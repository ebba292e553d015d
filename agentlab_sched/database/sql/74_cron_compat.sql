-- pg_cron's monitoring views over our tables (docs/coming-from.md, "pg_cron"): cron.job and
-- cron.job_run_details with pg_cron's columns, so queries written for pg_cron keep working.
-- The definitions live here, in schema agentlab_sched; migrate makes thin views of them in the
-- compatibility schema (AGENTLAB_SCHED_CRON_SCHEMA, `cron` by default) unless pg_cron itself is installed
-- there (install_cron_compat below).

-- The jobid cron.job shows for a schedule: pg_cron's job id for one imported from a job ("pg_cron job 7 in
-- database postgres"), else the schedule's id.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_jobid(schedule_id bigint, imported_from text) RETURNS bigint
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.substring(imported_from, '^pg_cron job ([0-9]+) in database ')::bigint,
                    schedule_id)
$$;

-- A sql run's result as pg_cron's return_message: "1 row" / "N rows" for a statement that returns rows,
-- else the command's status ("DELETE 3"); a task that is not sql: its result's status, if any.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_return_message(result jsonb) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN result ->> 'status' ~ '^SELECT [0-9]+$'
                THEN pg_catalog.split_part(result ->> 'status', ' ', 2)
                     || CASE WHEN pg_catalog.split_part(result ->> 'status', ' ', 2) = '1' THEN ' row' ELSE ' rows' END
                ELSE result ->> 'status' END
$$;

-- One row per schedule, as pg_cron's cron.job: jobid = the schedule's id (a schedule imported from pg_cron
-- keeps that job's id, so queries by jobid go on working), jobname = its name; command is
-- the SQL of a sql schedule, else the task and its inputs; database and username are where and as whom
-- a sql schedule runs, else this database and the role that created the schedule.
-- The creators are one derived table joined by schedule id, not a subquery per schedule: Citus, once the
-- audit is distributed, plans the former on its own and refuses the latter (docs/scaling.md).
CREATE OR REPLACE VIEW agentlab_sched.cron_job AS
SELECT agentlab_sched.cron_jobid(s.id, s.imported_from) AS jobid,
       s.cron AS schedule,
       CASE WHEN s.task = agentlab_sched.sql_task_name() THEN s.inputs ->> 'command'
            ELSE s.task || CASE WHEN s.inputs = '{}'::jsonb THEN '' ELSE ' ' || s.inputs::text END
       END AS command,
       'localhost'::text AS nodename,
       coalesce(pg_catalog.inet_server_port(), 5432) AS nodeport,
       coalesce(s.inputs ->> 'database', pg_catalog.current_database()::text) AS database,
       coalesce(s.inputs ->> 'username', creator.db_role) AS username,
       s.enabled AS active,
       s.name AS jobname
FROM agentlab_sched.schedules s
LEFT JOIN (SELECT DISTINCT ON (c.schedule_id) c.schedule_id, c.db_role FROM agentlab_sched.schedule_changes c
           WHERE c.operation = 'insert' ORDER BY c.schedule_id, c.id) creator ON creator.schedule_id = s.id;

-- One row per fire, as pg_cron's cron.job_run_details: runid = the fire's id (the ledger row), status
-- in pg_cron's words (starting, running, succeeded, failed; a skipped or refused fire is `failed`, its
-- reason the return_message), return_message as pg_cron writes it for a sql run ("1 row", "3 rows",
-- "DELETE 3"), the run's error, or why the fire did not run; job_pid = the backend that ran the command.
CREATE OR REPLACE VIEW agentlab_sched.cron_job_run_details AS
SELECT agentlab_sched.cron_jobid(s.id, s.imported_from) AS jobid,
       f.id AS runid,
       (r.result ->> 'pid')::integer AS job_pid,
       coalesce(f.inputs ->> 'database', s.inputs ->> 'database', pg_catalog.current_database()::text) AS database,
       coalesce(f.inputs ->> 'username', s.inputs ->> 'username') AS username,
       CASE WHEN s.task = agentlab_sched.sql_task_name() THEN coalesce(f.inputs, s.inputs) ->> 'command'
            ELSE s.task END AS command,
       -- The run's status in pg_cron's words is run_cron_status() (core/statuses.py); no run yet: starting.
       CASE WHEN f.status <> 'started' THEN 'failed'
            ELSE coalesce(agentlab_sched.run_cron_status(r.status), 'starting') END AS status,
       CASE WHEN f.status <> 'started' THEN f.reason
            WHEN r.status = 'succeeded' THEN agentlab_sched.cron_return_message(r.result)
            WHEN agentlab_sched.run_cron_status(r.status) = 'failed' THEN coalesce(agentlab_sched.run_error_text(r.error, r.error_term), r.status)
       END AS return_message,
       coalesce(r.started_at, f.created_at) AS start_time,
       r.finished_at AS end_time
FROM agentlab_sched.fires f
JOIN agentlab_sched.schedules s ON s.id = f.schedule_id
LEFT JOIN agentlab_sched.runs r ON r.id = f.run_id;

-- The comment that marks a compatibility schema as made by agentlab-sched.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_compat_comment() RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'agentlab-sched: pg_cron-compatible views (docs/coming-from.md); made by agentlab-sched migrate'
$$;

-- Whether schema `nsp` is a compatibility schema migrate made: it has the comment and is owned by the owner
-- of schema agentlab_sched. Not the comment alone: the owner of any schema can give it that comment, and
-- migrate and roles create would then make views in, and grant on, a schema that is not ours.
CREATE OR REPLACE FUNCTION agentlab_sched.is_cron_compat_schema(nsp oid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.obj_description(n.oid, 'pg_namespace') = agentlab_sched.cron_compat_comment()
                    AND n.nspowner = (SELECT o.nspowner FROM pg_catalog.pg_namespace o WHERE o.nspname = 'agentlab_sched'),
                    false)
    FROM pg_catalog.pg_namespace n WHERE n.oid = nsp
$$;

-- What install_cron_compat would do with `schema`: 'install' (absent, or made by us before), or why not.
CREATE OR REPLACE FUNCTION agentlab_sched.cron_compat_blocker(schema_name text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN n.oid IS NULL THEN NULL
        WHEN ext.names IS NOT NULL THEN 'extension ' || ext.names
        WHEN NOT agentlab_sched.is_cron_compat_schema(n.oid) THEN 'not made by agentlab-sched'
    END
    FROM (SELECT schema_name AS name) wanted
    LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = wanted.name
    -- an extension installed in it, or one whose script made it (pg_cron's `cron`)
    LEFT JOIN LATERAL (
        SELECT string_agg(DISTINCT e.extname, ', ') AS names FROM pg_catalog.pg_extension e
        WHERE e.extnamespace = n.oid
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                      WHERE d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.objid = n.oid
                        AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND d.refobjid = e.oid AND d.deptype = 'e')
    ) ext ON true
$$;

-- Make `schema`.job and `schema`.job_run_details (thin views of the two above), unless the schema belongs
-- to someone else (pg_cron's own schema, or one agentlab-sched did not make). NULL when made, else why
-- not (migrate says it).
CREATE OR REPLACE FUNCTION agentlab_sched.install_cron_compat(schema_name text) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    blocker text := agentlab_sched.cron_compat_blocker(schema_name);
BEGIN
    IF blocker IS NOT NULL THEN
        RETURN blocker;
    END IF;
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', schema_name);
    EXECUTE format('COMMENT ON SCHEMA %I IS %L', schema_name, agentlab_sched.cron_compat_comment());
    EXECUTE format('CREATE OR REPLACE VIEW %I.job AS SELECT * FROM agentlab_sched.cron_job', schema_name);
    EXECUTE format('CREATE OR REPLACE VIEW %I.job_run_details AS SELECT * FROM agentlab_sched.cron_job_run_details',
                   schema_name);
    PERFORM agentlab_sched.apply_privileges();  -- the reader reads them too
    RETURN NULL;
END
$$;
