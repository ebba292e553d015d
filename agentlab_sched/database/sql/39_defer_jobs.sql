-- Every Procrastinate job the scheduler creates (a fire's run, a run's next segment) goes through
-- defer_jobs(): Procrastinate's own procrastinate_defer_jobs_v1, with sequential scans off while it runs.
--
-- Why: each job inserted writes a procrastinate_events row (Procrastinate's trigger), whose foreign key
-- PostgreSQL checks with a lookup of the job by id. That lookup's plan is kept for the session, and a
-- plan made while procrastinate_jobs was near empty (just analysed, or a fresh database) is a sequential
-- scan: in a storm, where every job of a batch is inserted by one statement, each check then read every
-- job inserted before it (10,000 jobs: 50 million rows read, 5,000 a job). With sequential scans off
-- the check is the primary-key lookup it should be, whatever the statistics said.
CREATE OR REPLACE FUNCTION agentlab_sched.defer_jobs(jobs public.procrastinate_job_to_defer_v1[])
RETURNS bigint[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
BEGIN
    RETURN public.procrastinate_defer_jobs_v1(jobs);
END
$$;
