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
