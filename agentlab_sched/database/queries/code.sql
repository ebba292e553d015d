-- Schedules as code (schedules/code.py): a worker syncing its app's declared schedules.

-- name: code_sync_begin
-- Start the sync of deployment %(fingerprint)s (its %(tasks)s and %(schedules)s; the newest now when
-- %(adopt)s): when it was first seen.
SELECT agentlab_sched.begin_code_sync(%(fingerprint)s::text, %(tasks)s::text[], %(schedules)s::text[],
                                      %(adopt)s::boolean) AS first_seen_at

-- name: code_sync_end
-- End the sync: later changes in this transaction are not the code's.
SELECT agentlab_sched.end_code_sync()

-- name: code_schedules
-- Every schedule's name and task, where in code it is defined (if it is), whether it is gone from the
-- code, and the deployment that last wrote it.
SELECT name, task, defined_in, code_removed_at, code_version FROM agentlab_sched.schedules ORDER BY name

-- name: code_newer_deployments
-- The deployments first seen after %(fingerprint)s was: their tasks and schedules win over its.
SELECT d.fingerprint, d.tasks, d.schedules
FROM agentlab_sched.code_deployments d, agentlab_sched.code_deployments mine
WHERE mine.fingerprint = %(fingerprint)s AND d.first_seen_at > mine.first_seen_at

-- name: code_schedule_mark
-- Schedule %(name)s is defined in code at %(defined_in)s, last written by deployment %(fingerprint)s.
SELECT agentlab_sched.code_schedule_mark(%(name)s::text, %(defined_in)s::text, %(fingerprint)s::text)

-- name: code_schedule_gone
-- Schedule %(name)s is no longer declared in code: paused, saying where it was declared (not deleted).
SELECT agentlab_sched.code_schedule_gone(%(name)s::text)
