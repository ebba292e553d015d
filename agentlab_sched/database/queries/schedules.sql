-- Schedules: the statements of the Python admin API (schedules/admin.py). The SQL functions called are in
-- database/sql/30_schedules.sql. Every schedule option (core/options.py) is an argument of
-- schedule and alter_schedule (tests/contract/test_options.py checks it); NULL = not given.

-- name: schedule
-- Create or update schedule %(name)s (SQL schedule()); its id. With %(if_exists)s 'error': create only
-- (schedule.name_taken when the name exists).
SELECT agentlab_sched.schedule(
    name => %(name)s::text,
    cron => %(cron)s::text,
    task => %(task)s::text,
    inputs => %(inputs)s::jsonb,
    timezone => %(timezone)s::text,
    queue => %(queue)s::text,
    priority => %(priority)s::integer,
    overlap => %(overlap)s::text,
    misfire_grace => %(misfire_grace)s::interval,
    timeout => %(timeout)s::interval,
    enabled => %(enabled)s::boolean,
    catchup => %(catchup)s::text,
    max_catchup => %(max_catchup)s::integer,
    starts_at => %(starts_at)s::timestamptz,
    ends_at => %(ends_at)s::timestamptz,
    remaining_runs => %(remaining_runs)s::integer,
    pause_after_failures => %(pause_after_failures)s::integer,
    context => %(context)s::text,
    dst_gap => %(dst_gap)s::text,
    dst_repeat => %(dst_repeat)s::text,
    on_interrupt => %(on_interrupt)s::text,
    if_exists => %(if_exists)s::text) AS id

-- name: schedule_sql
-- Create or update schedule %(name)s running a SQL command (SQL schedule_sql()); its id.
SELECT agentlab_sched.schedule_sql(
    name => %(name)s::text,
    cron => %(cron)s::text,
    command => %(command)s::text,
    database => %(database)s::text,
    username => %(username)s::text,
    timezone => %(timezone)s::text,
    statement_timeout => %(statement_timeout)s::interval,
    enabled => %(enabled)s::boolean) AS id

-- name: alter_schedule
-- Change the fields of schedule %(name)s that are given (SQL alter_schedule()); its version.
SELECT agentlab_sched.alter_schedule(
    name => %(name)s::text,
    cron => %(cron)s::text,
    timezone => %(timezone)s::text,
    task => %(task)s::text,
    inputs => %(inputs)s::jsonb,
    queue => %(queue)s::text,
    priority => %(priority)s::integer,
    overlap => %(overlap)s::text,
    misfire_grace => %(misfire_grace)s::interval,
    timeout => %(timeout)s::interval,
    enabled => %(enabled)s::boolean,
    catchup => %(catchup)s::text,
    max_catchup => %(max_catchup)s::integer,
    starts_at => %(starts_at)s::timestamptz,
    ends_at => %(ends_at)s::timestamptz,
    remaining_runs => %(remaining_runs)s::integer,
    pause_after_failures => %(pause_after_failures)s::integer,
    context => %(context)s::text,
    dst_gap => %(dst_gap)s::text,
    dst_repeat => %(dst_repeat)s::text,
    on_interrupt => %(on_interrupt)s::text,
    new_name => %(new_name)s::text,
    expected_version => %(expected_version)s::integer,
    clear => %(clear)s::text[]) AS version

-- name: get_schedule
-- Schedule %(name)s as admin.Schedule: webhook URL and secret only as whether they are set (no ciphertext:
-- the reader role may run it).
SELECT id, name, cron, timezone, task, inputs, queue, priority, overlap, misfire_grace, timeout, enabled, catchup,
       max_catchup, starts_at, ends_at, remaining_runs, pause_after_failures, consecutive_failures,
       agentlab_sched.paused_reason_text(paused_reason, paused_reason_code, paused_reason_params) AS paused_reason,
       paused_at, context, dst_gap, dst_repeat, on_interrupt, session_key, imported_from, defined_in,
       next_run_at, replan, version, created_at, updated_at,
       webhook_format, webhook_url_hint, webhook_configured, webhook_has_secret, webhook_events
FROM agentlab_sched.schedules WHERE name = %(name)s

-- name: unschedule
-- Delete schedule %(name)s; whether there was one.
SELECT agentlab_sched.unschedule(%(name)s::text) AS deleted

-- name: pause
-- Stop firing schedule %(name)s, recording %(reason)s; whether this call paused it.
SELECT agentlab_sched.pause(%(name)s::text, %(reason)s::text) AS paused

-- name: pause_because
-- Stop firing schedule %(name)s, saying why as message %(code)s with %(params)s; whether this call paused it.
SELECT agentlab_sched.pause_because(%(name)s::text, %(code)s::text, %(params)s::jsonb) AS paused

-- name: resume
-- Fire schedule %(name)s again from now on; whether this call resumed it.
SELECT agentlab_sched.resume(%(name)s::text) AS resumed

-- name: schedule_status
-- The schedule_status row of schedule %(name)s (admin.ScheduleStatus).
SELECT id, name, cron, timezone, task, enabled, next_run_at, replan, last_fire_id, last_fire_at, last_fire_kind,
       last_fire_status, last_fire_reason_code, last_fire_reason, last_run_id, last_run_status,
       last_run_created_at, last_run_finished_at, consecutive_failures, pause_after_failures, paused_reason,
       paused_at, overlap, remaining_runs, version, updated_at, webhook_format, webhook_url_hint,
       webhook_has_secret, webhook_events, webhook
FROM agentlab_sched.schedule_status WHERE name = %(name)s

-- name: schedule_statuses
-- The schedule_status rows by name, after name %(after)s, at most %(limit)s (each when given): a page read
-- by the name's index, whatever the number of schedules.
SELECT id, name, cron, timezone, task, enabled, next_run_at, replan, last_fire_id, last_fire_at, last_fire_kind,
       last_fire_status, last_fire_reason_code, last_fire_reason, last_run_id, last_run_status,
       last_run_created_at, last_run_finished_at, consecutive_failures, pause_after_failures, paused_reason,
       paused_at, overlap, remaining_runs, version, updated_at, webhook_format, webhook_url_hint,
       webhook_has_secret, webhook_events, webhook
FROM agentlab_sched.schedule_status
WHERE %(after)s::text IS NULL OR name > %(after)s::text
ORDER BY name
LIMIT %(limit)s

-- name: schedule_count
-- How many schedules there are: counted up to %(bound)s (an index-only read of at most that many rows),
-- beyond it the planner's estimate (pg_class.reltuples, kept by ANALYZE and autovacuum), never a scan.
SELECT c.counted, c.counted > %(bound)s AS estimated,
       CASE WHEN c.counted > %(bound)s THEN greatest(
           (SELECT t.reltuples::bigint FROM pg_catalog.pg_class t WHERE t.oid = 'agentlab_sched.schedules'::regclass),
           c.counted) ELSE c.counted END AS total
FROM (SELECT count(*) AS counted FROM (SELECT 1 FROM agentlab_sched.schedules LIMIT %(bound)s + 1) b) c

-- name: schedule_many
-- Create the schedules %(definitions)s (a JSON array of schedule()'s arguments by name), all or none;
-- how many.
SELECT agentlab_sched.schedule_many(%(definitions)s::jsonb)
