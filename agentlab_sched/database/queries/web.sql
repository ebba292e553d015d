-- The web dashboard (agentlab_sched/web): what its pages read. Every change they make goes through the
-- SQL API the other callers use (schedules/admin.py, runs/lifecycle.py, firing/requests.py); these only
-- read, as the signed-in person (their privileges decide what they see), or as the server's own login for
-- the live updates and /healthz. Lists are paged by keyset (the last row's key), never by OFFSET.

-- name: web_session_user
-- The login role of this session (the person who signed in).
SELECT session_user::text AS login

-- name: web_ping
-- The database answers (/healthz).
SELECT true AS ok

-- name: web_privileges
-- What the session's role may execute among the SQL API's functions (by name: any signature counts), and
-- whether it may read a webhook's ciphertext (a test message needs it).
SELECT
    (SELECT coalesce(jsonb_object_agg(proname, may), '{}'::jsonb) FROM (
        SELECT p.proname, bool_or(has_function_privilege(p.oid, 'EXECUTE')) AS may
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'agentlab_sched'::regnamespace
          AND p.proname = ANY (ARRAY['pause', 'resume', 'trigger', 'trigger_now', 'backfill', 'alter_schedule',
                                     'unschedule', 'approve', 'reject', 'resume_run', 'abandon', 'cancel_run'])
        GROUP BY p.proname) f) AS functions,
    has_column_privilege('agentlab_sched.schedules', 'webhook_url_enc', 'SELECT') AS webhook_read

-- name: web_schedules
-- One page of schedules by name after %(after)s (NULL: from the start), at most %(limit)s, filtered by
-- %(status)s (active, paused, failing, overdue, stopped, code; NULL: all), %(task)s and %(text)s (a part of
-- the name or task, any case): the schedule_status row, where it is defined, and its last 30 fires
-- oldest first (the strip; their reasons as code, parameters and recorded text, rendered by
-- the page from the same catalogue: 1,500 msg() calls a page would cost more than the rest of it). Who
-- changed each last is web_changed_by.
-- The page's ids are chosen first, from the schedules table alone, then the rest is read for them only.
-- A text alone is first looked for among the next 2,000 names (near): a text most schedules share fills the
-- page there. Otherwise the order is not taken from the name index (that scan would stop early only if the
-- matches came early, and a rare text read every name): the matches are found (by the trigram index where
-- the server has pg_trgm: migrations/0006_web.sql) and sorted. The filters are sql/76_web.sql's
-- web_schedules_matching(), inlined here by the planner (twice: the near list is the text filter alone
-- within the next 2,000 names).
WITH near AS MATERIALIZED (
    SELECT m.id, m.name
    FROM agentlab_sched.web_schedules_matching(NULL, NULL, %(text)s) m
    WHERE %(text)s::text IS NOT NULL AND %(task)s::text IS NULL AND %(status)s::text IS NULL
      AND (%(after)s::text IS NULL OR m.name > %(after)s::text)
      AND m.name <= (SELECT max(n.name) FROM (
              SELECT s.name FROM agentlab_sched.schedules s
              WHERE %(after)s::text IS NULL OR s.name > %(after)s::text
              ORDER BY s.name LIMIT 2000) n)
    ORDER BY m.name
    LIMIT %(limit)s
), page AS MATERIALIZED (
    SELECT near.id, near.name FROM near WHERE (SELECT count(*) FROM near) = %(limit)s
    UNION ALL
    (SELECT s.id, s.name
     FROM agentlab_sched.web_schedules_matching(%(status)s, %(task)s, %(text)s) s
     WHERE (%(after)s::text IS NULL OR s.name > %(after)s::text)
      AND (SELECT count(*) FROM near) < %(limit)s
    ORDER BY CASE WHEN %(text)s::text IS NULL THEN s.name ELSE s.name || '' END
    LIMIT %(limit)s)
)
SELECT ss.id, ss.name, ss.cron, ss.timezone, ss.task, ss.enabled, ss.next_run_at, ss.replan,
       ss.last_fire_at, ss.last_fire_status, ss.last_fire_reason_code, ss.last_fire_reason,
       ss.last_run_id, ss.last_run_status, ss.consecutive_failures, ss.paused_reason, ss.paused_at,
       ss.version, ss.updated_at, s.defined_in, s.dst_gap, s.dst_repeat,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', f.id, 'fire_at', f.fire_at, 'kind', f.kind, 'status', f.status,
                   'reason_code', f.reason_code, 'reason_params', f.reason_params, 'reason', f.reason)
               ORDER BY f.fire_at, f.id), '[]'::jsonb)
        FROM (SELECT * FROM agentlab_sched.fires f0 WHERE f0.schedule_id = s.id
              ORDER BY f0.fire_at DESC, f0.id DESC LIMIT 30) f) AS strip
FROM page p
JOIN agentlab_sched.schedule_status ss ON ss.id = p.id
JOIN agentlab_sched.schedules s ON s.id = p.id
ORDER BY p.name

-- name: web_changed_by
-- Who last changed each schedule of %(ids)s (the newest audit row of each), as (id, changed_by). A query of
-- its own, not a subquery per schedule of web_schedules: on Citus the audit is distributed, and Citus
-- does not run a subquery correlated with the coordinator's schedules.
SELECT DISTINCT ON (c.schedule_id) c.schedule_id AS id, c.db_role AS changed_by
FROM agentlab_sched.schedule_changes c
WHERE c.schedule_id = ANY (%(ids)s::bigint[])
ORDER BY c.schedule_id, c.id DESC

-- name: web_schedule_names
-- The names of every schedule the filters of web_schedules select (a bulk pause or resume of them), by
-- name, at most %(limit)s: the filters are one definition, sql/76_web.sql's web_schedules_matching().
SELECT s.name
FROM agentlab_sched.web_schedules_matching(%(status)s, %(task)s, %(text)s) s
ORDER BY s.name
LIMIT %(limit)s

-- name: web_ledger
-- One page of schedule %(id)s's ledger, newest first, before the key (%(before_at)s, %(before_id)s) (NULL:
-- from the newest), at most %(limit)s; reasons in the session's locale.
SELECT f.id AS fire_id, f.fire_at, f.kind, f.status, f.reason_code,
       agentlab_sched.reason_text(f.reason_code, f.reason_params, f.reason) AS reason,
       f.run_id, r.status AS run_status, f.created_at, f.requested_by
FROM agentlab_sched.fires f
LEFT JOIN agentlab_sched.runs r ON r.id = f.run_id
WHERE f.schedule_id = %(id)s
  AND (%(before_at)s::timestamptz IS NULL OR (f.fire_at, f.id) < (%(before_at)s::timestamptz, %(before_id)s::bigint))
ORDER BY f.fire_at DESC, f.id DESC
LIMIT %(limit)s

-- name: web_changes
-- The last %(limit)s changes of schedule %(id)s (the audit, secrets masked there), newest first.
SELECT id, operation, changed_at, db_role, application_name, old_values, new_values
FROM agentlab_sched.schedule_changes
WHERE schedule_id = %(id)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: web_job
-- Procrastinate's job %(id)s: its status and attempts (a run's page).
SELECT id, status, attempts, queue_name, task_name, scheduled_at
FROM procrastinate_jobs WHERE id = %(id)s

-- name: web_workers
-- The workers that reported, most recently seen first, and whether they are alive (seen within the stall window).
SELECT name, kind, host, pid, app, queues, concurrency, fires, notifies, clock_skew, started_at, seen_at,
       seen_at > now() - agentlab_sched.policy_interval('stall_seconds') AS alive
FROM agentlab_sched.workers
ORDER BY seen_at DESC
LIMIT 200

-- name: web_overdue
-- The schedules nothing is firing (the overdue view), the longest first.
SELECT name, cron, timezone, next_run_at, late_by, problem
FROM agentlab_sched.overdue
ORDER BY late_by DESC NULLS LAST, name
LIMIT 200

-- name: web_outbox
-- The notifications waiting to be delivered, and those that failed in the last day.
SELECT
    (SELECT count(*) FROM agentlab_sched.outbox WHERE status = 'pending') AS backlog,
    (SELECT coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0)
       FROM agentlab_sched.outbox WHERE status = 'pending') AS oldest,
    (SELECT count(*) FROM agentlab_sched.outbox
      WHERE status = 'failed' AND created_at > clock_timestamp() - interval '1 day') AS failed

-- name: web_load_crons
-- The enabled schedules grouped by what decides their fire times (cron, zone, DST policies, validity
-- window, remaining_runs) with how many share it: the load page (web/load.py) evaluates each once, however
-- many schedules it has (a cron with H fields: each of its schedules, web_load_hashed).
SELECT cron, timezone, dst_gap, dst_repeat, starts_at, ends_at, remaining_runs, count(*) AS schedules
FROM agentlab_sched.schedules
WHERE enabled
GROUP BY cron, timezone, dst_gap, dst_repeat, starts_at, ends_at, remaining_runs

-- name: web_load_hashed
-- The enabled schedules whose cron is one of %(crons)s (those with H fields, whose times depend on the
-- name that resolves them), one row each.
SELECT name, cron, timezone, dst_gap, dst_repeat, starts_at, ends_at, remaining_runs, 1 AS schedules
FROM agentlab_sched.schedules
WHERE enabled AND cron = ANY (%(crons)s::text[])

-- name: web_lateness
-- For each minute of the hour before %(now)s: the fires that launched a run that started, and the lateness
-- from due time to the run's start (p50, p99, seconds). created_at bounds the scan (its index): a fire is
-- recorded after its due time. Each fire's run is looked up by its key, within an hour of the fire's own
-- created_at (a fire and its run are written in one transaction), so that only the run partitions of that
-- hour are probed instead of every run being hashed.
SELECT date_trunc('minute', f.fire_at) AS minute, count(*) AS fires,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.started_at - f.fire_at)) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM r.started_at - f.fire_at)) AS p99
FROM agentlab_sched.fires f
CROSS JOIN LATERAL (
    SELECT r.started_at FROM agentlab_sched.runs r
    WHERE r.id = f.run_id
      AND r.created_at >= f.created_at - interval '1 hour' AND r.created_at <= f.created_at + interval '1 hour'
      AND r.started_at IS NOT NULL
    LIMIT 1) r
WHERE f.created_at >= %(now)s::timestamptz - interval '1 hour'
  AND f.fire_at >= %(now)s::timestamptz - interval '1 hour'
  AND f.fire_at < %(now)s::timestamptz
  AND f.run_id IS NOT NULL
GROUP BY 1
ORDER BY 1

-- name: web_listen
-- The channels the live updates hear: fires or runs written (sql/58_live.sql), schedules changed,
-- notifications queued.
LISTEN agentlab_sched_live; LISTEN agentlab_sched_schedules; LISTEN agentlab_sched_outbox
