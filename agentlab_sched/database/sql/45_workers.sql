-- Workers report what they run (agentlab_sched.workers, read by `agentlab-sched doctor`). SECURITY DEFINER: the
-- worker role writes its own row through these only (granted by role_functions('worker')).

-- One report: insert or refresh the row of worker `name`; `worker_clock` is the worker's own clock when it
-- sent the report (its skew is measured against the database's). Rows not refreshed for a day are removed
-- here, so the table holds the workers of the last day and no housekeeping is needed.
CREATE OR REPLACE FUNCTION agentlab_sched.report_worker(
    name text, kind text, host text, pid integer, app text, queues text[], concurrency integer,
    fires boolean, notifies boolean, worker_clock timestamptz, procrastinate_worker_id bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO agentlab_sched.workers AS w (name, kind, procrastinate_worker_id, host, pid, app, queues, concurrency,
                                             fires, notifies, clock_skew, seen_at)
    VALUES (report_worker.name, report_worker.kind, report_worker.procrastinate_worker_id, report_worker.host,
            report_worker.pid, report_worker.app, report_worker.queues, report_worker.concurrency,
            report_worker.fires, report_worker.notifies,
            extract(epoch FROM worker_clock - clock_timestamp()), clock_timestamp())
    ON CONFLICT ON CONSTRAINT workers_pkey DO UPDATE SET
        procrastinate_worker_id = coalesce(excluded.procrastinate_worker_id, w.procrastinate_worker_id),
        queues = excluded.queues, concurrency = excluded.concurrency, fires = excluded.fires,
        notifies = excluded.notifies, clock_skew = excluded.clock_skew, seen_at = excluded.seen_at;
    DELETE FROM agentlab_sched.workers w WHERE w.seen_at < clock_timestamp() - interval '1 day';
END
$$;

-- A worker that stops cleanly says so: it is no longer counted.
CREATE OR REPLACE FUNCTION agentlab_sched.forget_worker(name text) RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM agentlab_sched.workers w WHERE w.name = forget_worker.name
$$;
