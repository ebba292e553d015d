-- Seeing into workers: what they report of themselves, what doctor and the metrics read.
-- Run through agentlab_sched.database.queries; the functions called are in database/sql/45_workers.sql and
-- database/sql/75_doctor.sql.

-- name: report_worker
-- One report of worker %(worker)s: what it runs, and its clock (its skew is measured against the database's).
SELECT agentlab_sched.report_worker(%(worker)s, %(kind)s, %(host)s, %(pid)s, %(app)s, %(queues)s::text[],
    %(concurrency)s, %(fires)s, %(notifies)s, %(clock)s, %(procrastinate_worker_id)s) AS done

-- name: forget_worker
-- Worker %(worker)s stopped cleanly: no longer counted.
SELECT agentlab_sched.forget_worker(%(worker)s) AS done

-- name: doctor_facts
-- Everything `agentlab-sched doctor` judges, as one JSON object.
SELECT agentlab_sched.doctor_facts() AS facts

-- name: metrics_gauges
-- What the metrics read from the database at each scrape: open runs by status, the outbox, overdue schedules.
SELECT
    (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb) FROM (
        SELECT status, count(*) AS n FROM agentlab_sched.runs
        WHERE agentlab_sched.run_is_open(status) GROUP BY status) r) AS runs,
    (SELECT count(*) FROM agentlab_sched.outbox WHERE status = 'pending') AS backlog,
    (SELECT count(*) FROM agentlab_sched.outbox WHERE status = 'pending' AND attempts > 0) AS retrying,
    (SELECT coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0)
       FROM agentlab_sched.outbox WHERE status = 'pending') AS oldest,
    (SELECT count(*) FROM agentlab_sched.outbox
      WHERE status = 'failed' AND created_at > clock_timestamp() - interval '1 day') AS failed,
    (SELECT count(*) FROM agentlab_sched.overdue) AS overdue

-- name: metrics_schedules
-- Per schedule, for alerting: its consecutive failures and when a run of it last succeeded (looked for
-- among its latest 1000 runs, so a scrape costs the same however long its history).
SELECT s.name, s.enabled, s.consecutive_failures AS failures,
       (SELECT extract(epoch FROM max(r.finished_at))
        FROM (SELECT r.status, r.finished_at FROM agentlab_sched.runs r WHERE r.schedule_id = s.id
              ORDER BY r.created_at DESC LIMIT 1000) r
        WHERE r.status = 'succeeded') AS last_success
FROM agentlab_sched.schedules s
ORDER BY s.name
