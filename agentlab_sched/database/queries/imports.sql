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
