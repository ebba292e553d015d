-- Taking jobs passes over a job while another job with its lock is doing or waiting ahead of it. For the
-- waiting ones Procrastinate has no index on lock (its lock index holds doing jobs only), so that check
-- read the whole jobs table once per statement (about 6,000 rows per job in a 10,000-job storm of
-- per-schedule locks). With this index, fetch_jobs looks each candidate's lock up instead.
CREATE INDEX agentlab_sched_jobs_todo_lock_idx ON public.procrastinate_jobs (lock, priority, id)
    WHERE status = 'todo' AND lock IS NOT NULL;
