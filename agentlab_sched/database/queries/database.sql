-- The database itself: migrate (database/migrate.py), the embedded server (database/embedded.py), the
-- connections (database/connections.py), and the CLI's doctor and dev commands (cli/worker.py).

-- name: migrate_lock
-- One migrate at a time (for this transaction): "agentlab-sched migrate" as a number.
SELECT pg_advisory_xact_lock(%(key)s)

-- name: lock_timeout
-- The session's lock_timeout (migrate waits for its lock at most 10 s, then puts it back).
SELECT current_setting('lock_timeout') AS value

-- name: set_lock_timeout
-- lock_timeout %(value)s for the rest of this transaction.
SELECT set_config('lock_timeout', %(value)s, true)

-- name: migrations_table_exists
-- Whether the record of applied migrations exists (not on a first install).
SELECT to_regclass('agentlab_sched.schema_migrations') IS NOT NULL AS found

-- name: migrate_lock_table
-- One migrate at a time: a lock only the owner of the migrations table can take (readers may SELECT).
LOCK TABLE agentlab_sched.schema_migrations IN EXCLUSIVE MODE

-- name: lock_firing_tables
-- The tables firing and jobs write, those that exist, all at once before migrate changes any: a tick reads
-- a table and then writes it, so migrate waiting for it midway (queued ahead of the tick's second lock)
-- made a deadlock. Taken under a short lock_timeout and tried again (migrate.py), so that migrate is never
-- queued long ahead of a tick.
DO $$
DECLARE
    names text;
BEGIN
    SELECT string_agg(format('%I.%I', t.schema_name, t.table_name), ', ' ORDER BY t.ord) INTO names
    FROM (VALUES (1, 'agentlab_sched', 'schedules'), (2, 'agentlab_sched', 'fire_requests'),
                 (3, 'agentlab_sched', 'fires'), (4, 'agentlab_sched', 'runs'), (5, 'agentlab_sched', 'approvals'),
                 (6, 'agentlab_sched', 'outbox'), (7, 'agentlab_sched', 'deliveries'),
                 (8, 'agentlab_sched', 'schedule_changes'), (9, 'public', 'procrastinate_jobs'))
         AS t(ord, schema_name, table_name)
    WHERE to_regclass(format('%I.%I', t.schema_name, t.table_name)) IS NOT NULL;
    IF names IS NOT NULL THEN
        EXECUTE 'LOCK TABLE ' || names || ' IN ACCESS EXCLUSIVE MODE';
    END IF;
END
$$

-- name: migrate_lock_holders
-- Who holds migrate's lock (the table's, or the advisory key %(key)s): pid, role, application, since.
SELECT string_agg(format('pid %%s (%%s, %%s, since %%s)', a.pid, a.usename, nullif(a.application_name, ''),
                         to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"')),
                  ', ' ORDER BY a.pid) AS holder
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.pid <> pg_backend_pid()
  AND ((l.locktype = 'advisory' AND l.classid::bigint = (%(key)s::bigint >> 32)
        AND l.objid::bigint = (%(key)s::bigint & 4294967295) AND l.objsubid = 1)
       OR (l.relation = to_regclass('agentlab_sched.schema_migrations') AND l.mode <> 'AccessShareLock'))

-- name: quiet_notices
-- No NOTICE for every IF NOT EXISTS of a migrate (this transaction only).
SET LOCAL client_min_messages = warning

-- name: create_schema
-- The schema everything of ours lives in.
CREATE SCHEMA IF NOT EXISTS agentlab_sched

-- name: create_migrations_table
-- The record of the migration files applied (ours and Procrastinate's), each with its checksum.
CREATE TABLE IF NOT EXISTS agentlab_sched.schema_migrations (
    name text PRIMARY KEY,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())

-- name: unpartitioned_history
-- The history tables a database before 0005_partitioned_history.sql has as plain tables, with their rows
-- estimated (the planner's rows per page times the pages the table has now) past 8 MB; NULL (to be
-- counted) below, or when the table was never analysed.
SELECT c.relname AS name,
       CASE WHEN pg_relation_size(c.oid) >= 8 * 1024 * 1024 AND c.reltuples >= 0 AND c.relpages > 0
            THEN (c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::bigint))::bigint
       END AS rows
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'agentlab_sched' AND c.relkind = 'r'
  AND c.relname IN ('fires', 'runs', 'outbox', 'deliveries', 'schedule_changes')
ORDER BY c.relname

-- name: count_history_rows
-- The rows of history table {table} (of agentlab_sched), counted.
SELECT count(*) AS n FROM agentlab_sched.{table}

-- name: recorded_fingerprint
-- What the last migrate recorded of its SQL files and catalogue (see migrate.fingerprint()).
SELECT value FROM agentlab_sched.config WHERE key = 'schema_fingerprint'

-- name: applied_migrations
-- The migration files applied, with their checksums.
SELECT name, checksum FROM agentlab_sched.schema_migrations

-- name: has_procrastinate
-- Whether Procrastinate's schema is there.
SELECT to_regclass('public.procrastinate_jobs') IS NOT NULL AS present

-- name: drop_job_triggers
-- Our triggers on procrastinate_jobs, dropped while Procrastinate's migrations run (sql/50_runs.sql makes
-- them again).
DO $$
BEGIN
    DROP TRIGGER IF EXISTS agentlab_sched_follow_job ON public.procrastinate_jobs;
    DROP TRIGGER IF EXISTS agentlab_sched_follow_deleted_job ON public.procrastinate_jobs;
END
$$

-- name: procrastinate_has_relation
-- Whether table or index %(a)s of Procrastinate's is there (a migration's marker, database/upstream.py).
SELECT to_regclass('public.' || quote_ident(%(a)s)) IS NOT NULL AS present

-- name: procrastinate_has_trigger
-- Whether trigger %(a)s is there.
SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = %(a)s AND NOT tgisinternal) AS present

-- name: procrastinate_has_function
-- Whether a function named %(a)s is there in schema public.
SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
               WHERE n.nspname = 'public' AND p.proname = %(a)s) AS present

-- name: procrastinate_has_type
-- Whether type %(a)s is there in schema public.
SELECT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
               WHERE n.nspname = 'public' AND t.typname = %(a)s) AS present

-- name: procrastinate_has_label
-- Whether enum %(a)s has the label %(b)s.
SELECT EXISTS (SELECT 1 FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid
               JOIN pg_namespace n ON n.oid = t.typnamespace
               WHERE n.nspname = 'public' AND t.typname = %(a)s AND e.enumlabel = %(b)s) AS present

-- name: procrastinate_has_column
-- Whether table %(a)s has the column %(b)s.
SELECT EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_schema = 'public' AND table_name = %(a)s AND column_name = %(b)s) AS present

-- name: record_migration
-- Migration file %(name)s was applied (its checksum %(checksum)s).
INSERT INTO agentlab_sched.schema_migrations (name, checksum) VALUES (%(name)s, %(checksum)s)

-- name: clear_messages
-- The message catalogue is written anew by every migrate.
DELETE FROM agentlab_sched.messages

-- name: insert_message
-- One template of the catalogue: code, locale, template.
INSERT INTO agentlab_sched.messages (code, locale, template) VALUES (%s, %s, %s)

-- name: clear_error_codes
-- The error registry is written anew by every migrate.
DELETE FROM agentlab_sched.error_codes

-- name: insert_error_code
-- One entry of the error registry: code, SQLSTATE.
INSERT INTO agentlab_sched.error_codes (code, sqlstate) VALUES (%s, %s)

-- name: clear_schedule_options
-- The schedule options are written anew by every migrate.
DELETE FROM agentlab_sched.schedule_options

-- name: insert_schedule_option
-- One schedule option (the columns of options.catalog_rows()).
INSERT INTO agentlab_sched.schedule_options (position, name, sql_type, default_value, required, clearable,
                                             choices, min_value, max_value, max_length, one_word, positive)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: clear_statuses
-- The run and fire statuses are written anew by every migrate.
DELETE FROM agentlab_sched.statuses

-- name: insert_status
-- One status (the columns of core/statuses.catalog_rows()).
INSERT INTO agentlab_sched.statuses (kind, status, position, is_open, is_final, is_held, is_failure,
                                     is_interrupted, is_error_free, cron_status)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: set_config
-- A deployment setting the database reads without an environment (locale, on-time window).
INSERT INTO agentlab_sched.config (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: database_exists
-- Whether the server has a database named %(name)s.
SELECT EXISTS (SELECT FROM pg_database WHERE datname = %(name)s) AS found

-- name: create_database
-- A new database {database} (an identifier, quoted by the queries module).
CREATE DATABASE {database}

-- name: set_locale
-- The locale SQL renders this session's messages in.
SELECT set_config('agentlab_sched.locale', %(locale)s, false)

-- name: schedule_timezone
-- The time zone of schedule %(name)s.
SELECT timezone FROM agentlab_sched.schedules WHERE name = %(name)s

-- name: install_cron_compat
-- pg_cron's monitoring views in schema %(schema)s, unless something not ours is there: what blocked it.
SELECT agentlab_sched.install_cron_compat(%(schema)s) AS blocker

-- name: listen_probe
-- A worker's check at start that its LISTEN connection hears NOTIFYs (no transaction pooler in between).
LISTEN {channel}

-- name: notify_probe
-- The NOTIFY of that check, sent on another connection.
SELECT pg_notify(%(channel)s, %(payload)s)

-- name: unlisten_probe
-- The check is over.
UNLISTEN {channel}

-- name: in_recovery
-- Is this server a standby (a command that wrote was refused: say why).
SELECT pg_is_in_recovery() AS in_recovery

-- name: ensure_partitions
-- The partitions of the history tables for now and the periods ahead (sql/72_partitions.sql).
SELECT agentlab_sched.ensure_partitions(now()) AS made

-- name: drop_unattached_history
-- The history tables an upgrade left out (empty), once sql/ made their views again on the parents.
SELECT agentlab_sched.drop_unattached_history() AS dropped

-- name: has_citus
-- Whether the citus extension is installed in this database (migrate then runs its Citus step).
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS found

-- name: citus_distribute
-- The Citus step (database/citus/distribute.sql, run just before): the tables it handed to Citus now.
SELECT table_name, placement FROM pg_temp.citus_distribute()

-- name: citus_coordinator_known
-- Whether the coordinator is in Citus's node list (citus_set_coordinator_host): reference tables then
-- have a copy here, which the coordinator's local tables join.
SELECT EXISTS (SELECT FROM pg_dist_node WHERE groupid = 0) AS found

-- name: check_public
-- Refuse while schema public is unsafe: another role may create in it, or owns functions there (02_public.sql).
SELECT agentlab_sched.check_public() AS safe
