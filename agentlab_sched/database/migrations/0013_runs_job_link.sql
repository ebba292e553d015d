-- A run's link to its Procrastinate job has no foreign key: the job triggers keep it (sql/50_runs.sql). The
-- key cost reads in every change of a job's runs and events: its check probed procrastinate_jobs on each
-- INSERT of a run and again on the run's second UPDATE in a transaction, and its ON DELETE SET NULL is what
-- follow_deleted_job() now does, in the same trigger that settles the run of a deleted job.
ALTER TABLE agentlab_sched.runs DROP CONSTRAINT runs_job_id_fkey;
