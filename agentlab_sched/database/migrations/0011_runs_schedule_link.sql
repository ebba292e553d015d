-- Finishing a job never waits on the schedules table (a migration's LOCK TABLE, DDL): a run's link to its
-- schedule has no foreign key any more. PostgreSQL checks a foreign key again when a transaction updates a
-- row it changed before (the batch finish writes a run's result, then the job trigger its status), and that
-- check takes the schedule's row. Deleting a schedule still unlinks its runs (sql/50_runs.sql).
ALTER TABLE agentlab_sched.runs DROP CONSTRAINT runs_schedule_id_fkey;
