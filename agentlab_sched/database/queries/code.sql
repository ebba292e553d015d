-- Schedules as code (schedules/code.py): a worker syncing its app's declared schedules.

-- name: code_sync_begin
-- One sync at a time; this transaction may change schedules defined in code (the trigger lets it).
SELECT pg_advisory_xact_lock(7161746375646531), set_config('agentlab_sched.code_sync', 'on', true)

-- name: code_deployment_seen
-- Record deployment %(fingerprint)s (first seen now, unless seen before; now again when %(adopt)s) and
-- its tasks and schedules; when it was first seen.
INSERT INTO agentlab_sched.code_deployments AS d (fingerprint, tasks, schedules)
VALUES (%(fingerprint)s, %(tasks)s, %(schedules)s)
ON CONFLICT (fingerprint) DO UPDATE
SET last_seen_at = clock_timestamp(), tasks = excluded.tasks, schedules = excluded.schedules,
    first_seen_at = CASE WHEN %(adopt)s THEN clock_timestamp() ELSE d.first_seen_at END
RETURNING first_seen_at

-- name: code_schedules
-- Every schedule's name and task, where in code it is defined (if it is), and whether it is gone from
-- the code.
SELECT name, task, defined_in, code_removed_at FROM agentlab_sched.schedules ORDER BY name

-- name: code_newer_deployments
-- The deployments first seen after %(fingerprint)s was: their tasks and schedules win over its.
SELECT d.fingerprint, d.tasks, d.schedules
FROM agentlab_sched.code_deployments d, agentlab_sched.code_deployments mine
WHERE mine.fingerprint = %(fingerprint)s AND d.first_seen_at > mine.first_seen_at

-- name: code_schedule_mark
-- Schedule %(name)s is defined in code at %(defined_in)s, last written by deployment %(fingerprint)s.
UPDATE agentlab_sched.schedules
SET defined_in = %(defined_in)s, code_version = %(fingerprint)s, code_removed_at = NULL
WHERE name = %(name)s

-- name: code_schedule_gone
-- Schedule %(name)s is no longer declared in code: paused with %(reason)s (not deleted).
UPDATE agentlab_sched.schedules
SET enabled = false, paused_reason = %(reason)s, code_removed_at = clock_timestamp()
WHERE name = %(name)s
