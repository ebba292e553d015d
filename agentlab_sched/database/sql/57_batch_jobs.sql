-- How `agentlab-sched worker` takes and finishes Procrastinate jobs: several in one statement
-- (agentlab_sched/worker/batch.py). Each does for many jobs exactly what Procrastinate's own function does for
-- one (procrastinate_fetch_job_v2, procrastinate_finish_job_v1), so the job triggers (Procrastinate's
-- events and NOTIFYs, our follow_job) fire as they always do; a plain `procrastinate worker` keeps using
-- Procrastinate's functions, with the same results one job at a time.

-- Take up to `wanted` jobs for worker `worker`: the ones procrastinate_fetch_job_v2 would return one
-- after the other (todo, due, in `queues` or any queue when NULL, highest priority first then oldest; a
-- job is passed over while another job with its lock is doing, or waiting ahead of it), marked doing in
-- one statement. Returns them with their run's context (run_contexts(); NULL for a job that is not a
-- run's), read after the job trigger made the run running: the worker looks nothing up per job. When the
-- runs cannot be read now (a lock held elsewhere beyond the session's lock_timeout, a statement timeout),
-- the jobs are taken all the same with run_read false: the run middleware looks their runs up itself.
CREATE OR REPLACE FUNCTION agentlab_sched.fetch_jobs(queues character varying[], worker bigint, wanted integer)
RETURNS TABLE (id bigint, status public.procrastinate_job_status, task_name character varying, priority integer,
               lock text, queueing_lock text, args jsonb, scheduled_at timestamptz, queue_name character varying,
               attempts integer, abort_requested boolean, worker_id bigint, run jsonb, run_read boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- The candidates in the order of Procrastinate's priority index, whatever the statistics say: right after
-- a storm of jobs was queued onto a table analysed near empty, a bitmap scan would sort every waiting job
-- at each call (2 ms for 10,000, against 0.06 ms). Nor a read of every job to find the ones taken by id,
-- which a plan kept from the session's first calls on a near-empty queue would do in every storm after.
SET enable_bitmapscan = off
SET enable_seqscan = off
-- The statements these jobs' triggers run (Procrastinate's events and their foreign-key checks, the run
-- following its job) keep their plans, where our connections plan every statement again (force_custom_plan):
-- 20,000 plans in a storm of 10,000 jobs. The choice of jobs is planned at each call all the same (EXECUTE:
-- a plan of its own, for the values given), since a plan kept from a near-empty queue is the bad one.
SET plan_cache_mode = auto
AS $$
DECLARE
    taken bigint[];
    contexts jsonb;
    read boolean := true;
BEGIN
    EXECUTE $take$
    WITH candidate AS (
        SELECT jobs.id
        FROM public.procrastinate_jobs AS jobs
        -- Procrastinate's one condition (doing, or waiting ahead) as two, so that each is an index lookup
        -- of the candidate's lock (its lock index for doing jobs, ours for waiting ones) rather than a read
        -- of every job. Under an OR, so that they stay subqueries run with each candidate's lock: as
        -- anti-joins, planned on statistics taken while the queue was near empty, they scanned every doing
        -- or waiting job for each candidate (1,100 buffers a call in a storm of 10,000 jobs). The test of
        -- ids (a doing job is never the todo candidate) keeps the first one a lookup too: with equalities
        -- only, it may be run once as a hash of every doing job.
        WHERE (jobs.lock IS NULL
               OR (NOT EXISTS (
                       SELECT 1 FROM public.procrastinate_jobs AS other_jobs
                       WHERE other_jobs.lock = jobs.lock AND other_jobs.status = 'doing' AND other_jobs.id <> jobs.id)
                   AND NOT EXISTS (
                       SELECT 1 FROM public.procrastinate_jobs AS other_jobs
                       WHERE other_jobs.lock = jobs.lock AND other_jobs.status = 'todo'
                         AND (other_jobs.priority > jobs.priority
                              OR (other_jobs.priority = jobs.priority AND other_jobs.id < jobs.id)))))
          AND jobs.status = 'todo'
          AND ($1 IS NULL OR jobs.queue_name = ANY ($1))
          AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())
        ORDER BY jobs.priority DESC, jobs.id ASC
        LIMIT $3
        FOR UPDATE OF jobs SKIP LOCKED
    )
    SELECT array_agg(candidate.id) FROM candidate
    $take$ INTO taken USING queues, worker, wanted;
    -- The jobs are locked: their queued runs start now, in one statement (start_runs), before the jobs
    -- are marked doing; the job trigger then finds them running and leaves them. Run by run, it moved
    -- each in a statement of its own: most of the time of taking 50 jobs.
    PERFORM agentlab_sched.start_runs(taken);
    -- By the ids as an array, a primary-key lookup each: a join with the candidates is planned (for any
    -- `wanted`) as a hash join that reads every job.
    UPDATE public.procrastinate_jobs j SET status = 'doing', worker_id = fetch_jobs.worker WHERE j.id = ANY (taken);
    -- The job trigger ran at the end of that statement: the runs of these jobs are running now.
    BEGIN
        SELECT jsonb_object_agg(c.job_id, c.context) INTO contexts FROM agentlab_sched.run_contexts(taken) c;
    EXCEPTION WHEN lock_not_available OR query_canceled THEN
        read := false;
    END;
    RETURN QUERY
        SELECT j.id, j.status, j.task_name, j.priority, j.lock, j.queueing_lock, j.args, j.scheduled_at,
               j.queue_name, j.attempts, j.abort_requested, j.worker_id,
               CASE WHEN read THEN contexts -> j.id::text END, read
        FROM public.procrastinate_jobs j
        WHERE j.id = ANY (taken)
        ORDER BY j.priority DESC, j.id;
END
$$;

-- Finish jobs as procrastinate_finish_job_v1 does each (status succeeded, failed or aborted, or deleted
-- with `delete_jobs`), the results of their runs kept first (where run_ids[i] is set, job ids[i] ran
-- run_ids[i] and returned results[i]). One position per job in every array. Returns the jobs that were not
-- todo or doing: nothing was done to them (Procrastinate raises for those).
--
-- A run whose job succeeds is settled here, with its result, in one update of its row (settle_run, what
-- the job trigger would do next): the job trigger then finds it ended and leaves it. The job's row is
-- locked first, the run's second (the job trigger's order). Other results are kept as the middleware
-- keeps them (record_results), for the job trigger to settle the run: a job deleted instead of finished
-- ends its run as its outcome says. Plans are kept and joins are index lookups, as in the job triggers
-- (50_runs.sql).
CREATE OR REPLACE FUNCTION agentlab_sched.finish_jobs(ids bigint[], statuses public.procrastinate_job_status[],
                                                      delete_jobs boolean[], run_ids uuid[], results jsonb[])
RETURNS bigint[]
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = auto
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    done bigint[];
    ran record;
    r agentlab_sched.runs;
    settled uuid[] := '{}';
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(statuses) s WHERE s IS NULL OR s NOT IN ('succeeded', 'failed', 'aborted')) THEN
        RAISE 'End status should be either "succeeded", "failed" or "aborted" (job ids: %)', ids;
    END IF;
    -- The jobs first, in id order, then each one's run, looked up by its job and id from the job's row
    -- (OFFSET 0 keeps it a look-up of its own: a join planned while the day's partitions were nearly
    -- empty, and kept for the session, read every open run of the day at each call once they filled).
    PERFORM FROM public.procrastinate_jobs j
    WHERE j.id = ANY (ARRAY(SELECT x.id FROM unnest(ids, statuses, delete_jobs, run_ids) AS x(id, status, del, run_id)
                            WHERE x.run_id IS NOT NULL AND x.status = 'succeeded' AND NOT x.del))
      AND j.status IN ('todo', 'doing')
    ORDER BY j.id
    FOR UPDATE;
    FOR ran IN
        SELECT j.abort_requested, x.result, l.run
        FROM unnest(ids, statuses, delete_jobs, run_ids, results) AS x(id, status, del, run_id, result)
        JOIN public.procrastinate_jobs j ON j.id = x.id AND j.id = ANY (ids)
        CROSS JOIN LATERAL (SELECT run FROM agentlab_sched.runs run WHERE run.job_id = x.id AND run.id = x.run_id
                            OFFSET 0 FOR UPDATE) l
        WHERE x.run_id IS NOT NULL AND x.status = 'succeeded' AND NOT x.del AND j.status IN ('todo', 'doing')
        ORDER BY x.id
    LOOP
        IF (ran.run).status <> 'running' THEN
            CONTINUE;  -- ended meanwhile: its result is kept below, for the job trigger
        END IF;
        r := ran.run;
        r.result := ran.result;
        r.outcome := 'succeeded';
        PERFORM agentlab_sched.settle_run(r, 'succeeded', ran.abort_requested);
        settled := settled || r.id;
    END LOOP;
    PERFORM agentlab_sched.record_results(array_agg(x.run_id), array_agg(x.id), array_agg(x.result))
    FROM unnest(ids, statuses, delete_jobs, run_ids, results) AS x(id, status, del, run_id, result)
    WHERE x.run_id IS NOT NULL AND NOT x.run_id = ANY (settled)
    HAVING count(*) > 0;
    WITH u AS (
        SELECT * FROM unnest(ids, statuses, delete_jobs) AS x(id, status, del) ORDER BY x.id
    ), deleted AS (
        -- `j.id = ANY (ids)` too: the jobs are looked up by primary key, not read all for a join.
        DELETE FROM public.procrastinate_jobs j USING u
        WHERE j.id = ANY (ids) AND j.id = u.id AND u.del AND j.status IN ('todo', 'doing')
        RETURNING j.id
    ), updated AS (
        UPDATE public.procrastinate_jobs j
        SET status = u.status, abort_requested = false,
            attempts = CASE j.status WHEN 'doing' THEN j.attempts + 1 ELSE j.attempts END
        FROM u
        WHERE j.id = ANY (ids) AND j.id = u.id AND NOT u.del AND j.status IN ('todo', 'doing')
        RETURNING j.id
    )
    SELECT array_agg(x.id) INTO done FROM (SELECT deleted.id FROM deleted UNION ALL SELECT updated.id FROM updated) x;
    RETURN ARRAY(SELECT i FROM unnest(ids) i WHERE NOT i = ANY (coalesce(done, '{}')));
END
$$;
