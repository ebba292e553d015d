-- Firing: the tick (claim, plan, apply), re-planning, manual and backfill requests, the precise loop.
-- Run through agentlab_sched.database.queries; the functions called are in database/sql/40_claim.sql to 43_requests.sql.

-- name: db_now
-- The database clock: one clock for all workers.
SELECT clock_timestamp() AS now

-- name: wait_until
-- Wait until %(at)s on the database clock (at once if it is past), then say the clock: the precise loop's
-- fires, written a few milliseconds ahead, are committed at their due time and not before.
SELECT clock_timestamp() AS woke
FROM (SELECT pg_sleep(greatest(0, extract(epoch FROM %(at)s::timestamptz - clock_timestamp())::float8))) AS waited

-- name: claim_due
-- The schedules due at %(now)s and those to re-plan, at most %(batch)s, locked (SKIP LOCKED) for this tick.
SELECT * FROM agentlab_sched.claim_due(%(now)s, %(batch)s)

-- name: claim_due_first
-- The first batch of a tick: as claim_due, at most %(batch)s, but only %(storm_batch)s when more than
-- %(batch)s are due (a storm: its first jobs are committed after a few fires), with `storm` saying which.
-- The count reads at most %(batch)s + 1 entries of the due index.
SELECT c.*, d.storm
FROM (SELECT count(*) > %(batch)s AS storm
      FROM (SELECT 1 FROM agentlab_sched.schedules s
            WHERE s.enabled AND s.next_run_at <= %(now)s AND s.replan IS NULL
            LIMIT %(batch)s + 1) AS due) AS d,
     LATERAL agentlab_sched.claim_due(%(now)s, CASE WHEN d.storm THEN %(storm_batch)s ELSE %(batch)s END) AS c

-- name: apply_plans
-- Write the plans of one batch (ledger rows, runs, jobs, next_run_at); the outcome of each schedule.
SELECT agentlab_sched.apply_plans(%(plans)s::jsonb, %(now)s, %(isolate)s) AS outcomes

-- name: lease_schedules
-- Schedules %(ids)s are being resolved (outside any transaction) until %(until)s: other ticks skip them.
SELECT agentlab_sched.lease_schedules(%(ids)s::bigint[], %(until)s)

-- name: apply_resolved
-- Write the plans of leased schedules once their resolvers have answered (locked again, applied only if
-- unchanged meanwhile); the outcome of each schedule.
SELECT agentlab_sched.apply_resolved(%(plans)s::jsonb, %(now)s, %(isolate)s) AS outcomes

-- name: lock_replans
-- The schedules whose next_run_at must be computed (replan set), optionally only %(ids)s, locked.
SELECT * FROM agentlab_sched.claim_replans(%(ids)s::bigint[])

-- name: set_next_runs
-- Store the re-planned next_run_at of schedules %(ids)s (%(nexts)s), unless one was asked to re-plan
-- differently meanwhile (%(replans)s: what each was asked); how many moved.
SELECT agentlab_sched.set_next_runs(%(ids)s::bigint[], %(nexts)s::timestamptz[], %(replans)s::text[]) AS n

-- name: register_tasks
-- Record the tasks a live worker runs (a fire for an unregistered task is refused).
SELECT agentlab_sched.register_tasks(%(names)s)

-- name: next_request
-- The next pending request (or only request %(id)s), not %(skip)s, with its schedule; locked (SKIP LOCKED).
SELECT * FROM agentlab_sched.next_request(%(id)s::bigint, %(skip)s::bigint[])

-- name: carry_out_request
-- Fire the due times of one request through the rules of every fire; its outcome. With %(wait)s false, a
-- schedule locked by someone else raises lock_not_available at once.
SELECT agentlab_sched.carry_out_request(%(id)s, %(times)s, %(refusals)s::jsonb, %(wait)s) AS result

-- name: fail_request
-- Mark request %(id)s failed with reason %(code)s / %(params)s (never retried); its outcome.
SELECT agentlab_sched.fail_request(%(id)s, %(code)s, %(params)s::jsonb) AS result

-- name: request_trigger
-- Ask for a manual fire of schedule %(name)s now, with %(inputs)s instead of its own; the request's id.
SELECT agentlab_sched.trigger(%(name)s, %(inputs)s::jsonb, %(even_if_paused)s) AS id

-- name: request_trigger_now
-- Ask for a manual fire of schedule %(name)s now, with its own inputs (a privilege of its own); its id.
SELECT agentlab_sched.trigger_now(%(name)s, %(even_if_paused)s) AS id

-- name: may_carry_out
-- Whether this session may carry out fire requests itself (else a worker does, within a tick).
SELECT coalesce(bool_or(has_function_privilege(p.oid, 'EXECUTE')), false) AS may
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'agentlab_sched'::regnamespace AND p.proname = 'carry_out_request'

-- name: request_state
-- Whether request %(id)s was carried out, and its outcome.
SELECT done_at, fire_ids, error_code, error_params FROM agentlab_sched.fire_requests WHERE id = %(id)s

-- name: request_backfill
-- Ask for one backfill fire per due time of %(name)s in [%(start)s, %(end)s] under %(overlap)s; its id.
SELECT agentlab_sched.backfill(%(name)s, %(start)s, %(end)s, %(overlap)s) AS id

-- name: set_requested_by
-- Who asked for request %(id)s, as the caller calls itself (the CLI's user, a script's name): kept beside
-- the login role the request records.
SELECT agentlab_sched.label_request(%(id)s, %(requested_by)s::text)

-- name: fire_outcomes
-- The ledger rows %(ids)s, as the outcome of a trigger or a backfill (reasons in the session's locale).
SELECT id AS fire_id, status, run_id::text AS run_id, fire_at,
       agentlab_sched.reason_text(reason_code, reason_params, reason) AS reason, reason_code
FROM agentlab_sched.fires WHERE id = ANY(%(ids)s) ORDER BY fire_at, id

-- name: next_wake
-- For the precise loop: seconds until the next due time (a schedule another worker is resolving counts
-- from the end of its lease), that due time unless it is a lease's end (the loop may tick for it a little
-- ahead), and whether something waits already. By the due index, never a scan (it runs
-- after every tick): the first due time not under a lease, and the few leased schedules due before it (no
-- schedule due later can wake it sooner). `resolving_until IS NOT NULL` is implied by the lease test, and
-- written out so that the leased ones are read by their own index (schedules_leased_idx): by the due index
-- the planner estimated a third of all schedules and, at a million, started two parallel workers at every
-- call (17 ms of CPU, every tick).
WITH free AS (
    SELECT next_run_at AS at FROM agentlab_sched.schedules
    WHERE enabled AND next_run_at IS NOT NULL AND NOT coalesce(resolving_until > clock_timestamp(), false)
    ORDER BY next_run_at LIMIT 1
), leased AS (
    SELECT min(greatest(s.next_run_at, s.resolving_until)) AS at FROM agentlab_sched.schedules s
    WHERE s.enabled AND s.next_run_at < coalesce((SELECT at FROM free), 'infinity')
      AND s.resolving_until IS NOT NULL AND s.resolving_until > clock_timestamp()
)
SELECT extract(epoch FROM least((SELECT at FROM free), (SELECT at FROM leased)) - clock_timestamp()) AS wait,
       -- the due time itself, which the loop may tick for ahead of time; not the end of a lease
       CASE WHEN (SELECT at FROM leased) IS NULL OR (SELECT at FROM leased) > (SELECT at FROM free)
            THEN (SELECT at FROM free) END AS at,
       EXISTS (SELECT 1 FROM agentlab_sched.schedules WHERE replan IS NOT NULL)
       OR EXISTS (SELECT 1 FROM agentlab_sched.fire_requests WHERE done_at IS NULL) AS more

-- name: listen_schedules
-- Be woken by a change of schedules (the NOTIFY of the schedules triggers).
LISTEN agentlab_sched_schedules

-- name: housekeeping
-- One round of housekeeping: suspended runs, timeouts, and when %(prune_due)s the partitions ahead and
-- retention; what it did. A database up for less
-- than the stall window (it restarted) has heard no heartbeat from workers that are alive but could not
-- reach it meanwhile: runs are not suspended until it has been up that long.
SELECT agentlab_sched.housekeeping(
    now(),
    CASE WHEN pg_postmaster_start_time() > now() - %(stalled_after)s::interval THEN interval '100 years'
         ELSE %(stalled_after)s::interval END,
    %(keep)s::interval, %(abort_grace)s::interval, %(batch)s, %(prune_due)s) AS done
