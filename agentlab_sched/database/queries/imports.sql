-- The imports (imports/*.py): reading pg_cron's jobs, and marking the schedules made from them.

-- name: pg_cron_present
-- Whether pg_cron is installed in this database (its cron.job table).
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') AND to_regclass('cron.job') IS NOT NULL
       AS present

-- name: pg_cron_jobs
-- pg_cron's jobs, oldest first (the columns of pg_cron 1.3 and later).
SELECT jobid, jobname, schedule, command, nodename, nodeport, database, username, active
FROM cron.job ORDER BY jobid

-- name: pg_cron_timezone
-- The time zone pg_cron reads its schedules in (cron.timezone, pg_cron 1.6; before that always GMT), and
-- this database's name.
SELECT current_setting('cron.timezone', true) AS timezone, current_database()::text AS database

-- name: pg_cron_unschedule
-- Remove pg_cron job %(jobid)s (in the transaction that enables the schedule made from it).
SELECT cron.unschedule(%(jobid)s::bigint) AS removed

-- name: imported_schedules
-- The schedules made by an import, by where they came from.
SELECT name, imported_from, enabled FROM agentlab_sched.schedules WHERE imported_from IS NOT NULL

-- name: mark_imported
-- Record where schedule %(name)s came from (%(source)s) and give it pg_cron's overlap (%(overlap)s).
SELECT agentlab_sched.mark_imported(%(name)s::text, %(source)s::text, %(overlap)s::text)

-- name: run_as_role
-- Role %(role)s (given with --run-as): whether it is a superuser and whether it owns schema agentlab_sched
-- (a sql schedule may run as neither); no row when there is no such role.
SELECT r.rolsuper AS superuser, r.oid = n.nspowner AS owner
FROM pg_catalog.pg_roles r LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = 'agentlab_sched'
WHERE r.rolname = %(role)s

-- name: server_identity
-- Which server this is: its system identifier (the same on every database of one server), with the
-- address and port the connection reached as a second opinion.
SELECT (SELECT s.system_identifier::text FROM pg_catalog.pg_control_system() s) AS system_identifier,
       coalesce(host(inet_server_addr()), '') AS address, inet_server_port() AS port

-- name: pg_cron_doubles
-- Active pg_cron jobs (pg_cron in this database) whose imported schedule is enabled too: both schedulers
-- run them.
SELECT j.jobid, coalesce(j.jobname, '') AS jobname, s.name AS schedule
FROM cron.job j JOIN agentlab_sched.schedules s
  ON s.imported_from = 'pg_cron job ' || j.jobid || ' in database ' || current_database()
WHERE j.active AND s.enabled
ORDER BY j.jobid
