-- Runs: the statements of the run lifecycle API (runs/lifecycle.py), the run middleware
-- (worker/middleware.py) and current_run() (runs/context.py). The SQL functions called are in
-- database/sql/50_runs.sql to 53_run_people.sql and 80_housekeeping.sql.

-- name: find_run
-- The id of the run %(ref)s names (an id or its first characters); NotFound / ValidationError.
SELECT agentlab_sched.find_run(%(ref)s::text) AS id

-- name: get_run
-- Run %(id)s as lifecycle.Run: its schedule's name and zone, its fire, the approval it waits on.
SELECT r.id, r.schedule_id, s.name AS schedule_name, coalesce(s.timezone, 'UTC') AS timezone, r.fire_id,
       f.fire_at, f.kind, r.task, r.inputs, r.status, r.segment,
       agentlab_sched.run_error_text(r.error, r.error_term) AS error, r.error_code, r.result, r.state,
       r.session_key, r.started_by, r.timeout, r.deadline_at, r.abort_reason, r.cancelled_by, r.suspended_at,
       r.job_id, r.created_at, r.started_at, r.finished_at, r.updated_at,
       (SELECT to_jsonb(a) - 'job_id' FROM agentlab_sched.approvals a
        WHERE a.run_id = r.id AND a.segment = r.segment AND a.status = 'pending') AS waiting_for
FROM agentlab_sched.runs r
LEFT JOIN agentlab_sched.schedules s ON s.id = r.schedule_id
LEFT JOIN agentlab_sched.fires f ON f.id = r.fire_id
WHERE r.id = %(id)s

-- name: list_runs
-- Runs newest first, of schedule %(schedule)s, in status %(status)s, created in [%(since)s, %(until)s), older
-- than the key (%(before_at)s, %(before_id)s) (a page after the last row of the previous one; each when
-- given), at most %(limit)s; the columns of get_run. runs_created_idx serves the order.
SELECT r.id, r.schedule_id, s.name AS schedule_name, coalesce(s.timezone, 'UTC') AS timezone, r.fire_id,
       f.fire_at, f.kind, r.task, r.inputs, r.status, r.segment,
       agentlab_sched.run_error_text(r.error, r.error_term) AS error, r.error_code, r.result, r.state,
       r.session_key, r.started_by, r.timeout, r.deadline_at, r.abort_reason, r.cancelled_by, r.suspended_at,
       r.job_id, r.created_at, r.started_at, r.finished_at, r.updated_at,
       (SELECT to_jsonb(a) - 'job_id' FROM agentlab_sched.approvals a
        WHERE a.run_id = r.id AND a.segment = r.segment AND a.status = 'pending') AS waiting_for
FROM agentlab_sched.runs r
LEFT JOIN agentlab_sched.schedules s ON s.id = r.schedule_id
LEFT JOIN agentlab_sched.fires f ON f.id = r.fire_id
WHERE (%(schedule)s::text IS NULL OR s.name = %(schedule)s::text)
  AND (%(status)s::text IS NULL OR r.status = %(status)s::text)
  AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s::timestamptz)
  AND (%(before_at)s::timestamptz IS NULL OR (r.created_at, r.id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY r.created_at DESC, r.id DESC
LIMIT %(limit)s

-- name: run_approvals
-- Every approval point of run %(id)s, oldest first (context.Approval).
SELECT id, run_id, segment, title, state, status, decided_by, decided_label, decided_at, comment, created_at
FROM agentlab_sched.approvals WHERE run_id = %(id)s ORDER BY segment

-- name: list_fires
-- The ledger newest first (fire_history), of schedule %(schedule)s, in status %(status)s, since %(since)s,
-- older than the key (%(before_at)s, %(before_id)s) (the created_at and id of the last fire of the previous
-- page; each when given), at most %(limit)s (lifecycle.Fire). In the view's own order (created_at DESC, id
-- DESC): an ORDER BY here too would keep PostgreSQL from planning the view for the first rows only (the
-- LIMIT reaches into a subquery only when nothing is left to sort above it), and it would read, render and
-- sort the whole ledger to return 50 rows; so the rows come by fires_created_idx, newest first, and the
-- key, in the index's own columns, is where its scan starts.
SELECT fire_id, schedule_id, schedule_name, fire_at, kind, status, reason_code, reason, run_id, run_status,
       created_at, requested_by, timezone
FROM agentlab_sched.fire_history
WHERE (%(schedule)s::text IS NULL OR schedule_name = %(schedule)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(before_at)s::timestamptz IS NULL
       OR (created_at, fire_id) < (%(before_at)s::timestamptz, %(before_id)s::bigint))
LIMIT %(limit)s

-- name: fire_created_at
-- When fire %(id)s was written (its place in the ledger's order, with its id), NULL when there is no such
-- fire: the key of a page of list_fires. Found by the primary key (id, fire_at) of each partition.
SELECT max(created_at) AS created_at FROM agentlab_sched.fires WHERE id = %(id)s::bigint

-- name: schedule_exists
-- Whether there is a schedule named %(name)s.
SELECT EXISTS (SELECT FROM agentlab_sched.schedules WHERE name = %(name)s) AS found

-- name: approve
-- Approve the pending approval of run %(run)s (of %(segment)s when given); %(by)s is a label, the database
-- records the session's role and its own clock.
SELECT agentlab_sched.approve(%(run)s, %(by)s::text, %(comment)s::text, %(segment)s::int) AS value

-- name: reject
-- Reject the pending approval of run %(run)s: it is cancelled (recorded as approve records).
SELECT agentlab_sched.reject(%(run)s, %(by)s::text, %(comment)s::text, %(segment)s::int) AS value

-- name: resume_run
-- Re-queue suspended run %(run)s.
SELECT agentlab_sched.resume_run(%(run)s, %(by)s::text, coalesce(%(now)s::timestamptz, now())) AS value

-- name: abandon
-- Give up on suspended run %(run)s: it is cancelled.
SELECT agentlab_sched.abandon(%(run)s, %(by)s::text, coalesce(%(now)s::timestamptz, now())) AS value

-- name: cancel_run
-- Cancel run %(run)s: 'cancelled', or 'abort_requested' for a running one.
SELECT agentlab_sched.cancel_run(%(run)s, %(by)s::text, coalesce(%(now)s::timestamptz, now())) AS value

-- name: reset_session
-- A new session key for persistent schedule %(name)s.
SELECT agentlab_sched.reset_session(%(name)s::text) AS key

-- name: detect_suspended
-- Suspend the runs whose worker stopped heartbeating for %(after)s; how many.
SELECT agentlab_sched.detect_suspended(coalesce(%(now)s::timestamptz, now()), %(after)s::interval) AS n

-- name: enforce_timeouts
-- Abort the runs past their deadline; how many changed.
SELECT agentlab_sched.enforce_timeouts(coalesce(%(now)s::timestamptz, now()), %(grace)s::interval) AS n

-- name: prune
-- Remove finished history older than %(age)s, at most %(batch)s rows a statement; what was removed.
SELECT agentlab_sched.prune(%(age)s::interval, coalesce(%(now)s::timestamptz, now()), %(batch)s::int) AS r

-- name: run_context
-- What current_run() tells the task of job %(job)s (NULL for a job the scheduler did not start).
SELECT agentlab_sched.run_context(%(job)s) AS ctx

-- name: renew_session
-- A new session key for run %(run)s (its persistent schedule keeps it for its next runs).
SELECT agentlab_sched.renew_session(%(run)s::uuid) AS key

-- The middleware's calls render messages in the deployment's locale (%(locale)s): the CTE sets it for the
-- statement's transaction before the call runs.

-- name: mark_shutdown
-- A stopping worker aborted run %(run)s's job %(job)s: the run is interrupted, not cancelled; the value is
-- what its on_interrupt makes of it (queued, suspended, cancelled), NULL when it was no longer running.
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT CASE WHEN agentlab_sched.mark_shutdown(%(run)s::uuid, %(job)s)
            THEN agentlab_sched.shutdown_outcome(%(run)s::uuid) END AS value FROM l

-- name: record_not_serialisable
-- The state a task passed to AwaitApproval is not JSON (%(problem)s): the run fails with that error.
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.record_task_error(
    %(run)s::uuid, %(job)s,
    agentlab_sched.msg('run.task_not_serialisable', jsonb_build_object('problem', %(problem)s::text)),
    'run.task_not_serialisable', jsonb_build_object('problem', %(problem)s::text)) AS value FROM l

-- name: await_approval
-- Run %(run)s asks a person %(title)s, keeping %(state)s: the segment that waits.
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.await_approval(%(run)s::uuid, %(job)s, %(title)s::text, %(state)s::jsonb) AS value FROM l

-- name: record_task_error
-- Run %(run)s's task failed: %(message)s (code %(code)s; with %(params)s when the error is a message of the
-- catalogue, rendered in the reader's language when read, NULL for the task's own words).
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.record_task_error(%(run)s::uuid, %(job)s, %(message)s::text, %(code)s::text,
                                        %(params)s::jsonb) AS value FROM l

-- name: record_result
-- Run %(run)s's task returned %(value)s.
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.record_result(%(run)s::uuid, %(job)s, %(value)s::jsonb) AS value FROM l

-- name: finish_after_abort
-- Run %(run)s's task ended after an abort request: the reason (a timeout says how late, within %(grace)s).
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.finish_after_abort(%(run)s::uuid, %(job)s, clock_timestamp(),
                                         make_interval(secs => %(grace)s)) AS value FROM l

-- name: time_out_run
-- Run %(run)s reached its deadline: abort its job; report it if still going after %(grace)s.
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.time_out_run(%(run)s::uuid, clock_timestamp(), make_interval(secs => %(grace)s)) AS value
FROM l

-- name: hand_back_job
-- A stopping worker puts job %(job)s back to todo (its run's body never started): whether it did.
SELECT agentlab_sched.hand_back_job(%(job)s) AS back

-- name: record_unknown_task
-- The worker that took job %(job)s does not know its task: the run's error says so.
WITH l AS MATERIALIZED (SELECT set_config('agentlab_sched.locale', %(locale)s, true))
SELECT agentlab_sched.record_unknown_task(%(job)s) AS value FROM l

-- name: jobs_doing_on_worker
-- The jobs the database has as doing on worker %(worker)s (the worker compares them with the ones it runs).
SELECT coalesce(array_agg(j.id ORDER BY j.id), '{}') AS ids
FROM public.procrastinate_jobs j WHERE j.worker_id = %(worker)s AND j.status = 'doing'

-- name: worker_heartbeat
-- Worker %(worker)s is alive: its heartbeat now; whether its row was still there.
WITH beat AS (UPDATE public.procrastinate_workers SET last_heartbeat = now() WHERE id = %(worker)s RETURNING id)
SELECT EXISTS (SELECT 1 FROM beat) AS alive

-- name: worker_register_again
-- Worker %(worker)s was pruned as stalled meanwhile (an outage): its row again, with the jobs %(jobs)s it
-- runs (their worker was set NULL), so that their runs are not suspended.
WITH w AS (
    INSERT INTO public.procrastinate_workers (id, last_heartbeat) OVERRIDING SYSTEM VALUE
    VALUES (%(worker)s, now()) ON CONFLICT DO NOTHING RETURNING id
), j AS (
    UPDATE public.procrastinate_jobs SET worker_id = %(worker)s
    WHERE id = ANY (%(jobs)s::bigint[]) AND status = 'doing' AND worker_id IS NULL
    RETURNING id
)
SELECT (SELECT count(*) FROM w) AS registered, (SELECT count(*) FROM j) AS jobs

-- name: resume_suspended
-- Re-queue every suspended run of schedule %(name)s (of every schedule when NULL): how many.
SELECT agentlab_sched.resume_suspended(%(name)s::text, %(by)s::text, coalesce(%(now)s::timestamptz, now())) AS value

-- name: abandon_suspended
-- Give up on every suspended run of schedule %(name)s (of every schedule when NULL): how many.
SELECT agentlab_sched.abandon_suspended(%(name)s::text, %(by)s::text, coalesce(%(now)s::timestamptz, now())) AS value
