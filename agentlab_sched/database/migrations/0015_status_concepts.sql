-- More of agentlab_sched/core/statuses.py is copied into agentlab_sched.statuses, and sql/01_statuses.sql
-- makes helpers from it: run_is_failure() (failed, timed_out), run_is_troubled() (a failure, or
-- interrupted: suspended), run_is_error_free() (a run in it carries no error) and run_cron_status()
-- (pg_cron's word for a status). migrate writes the table anew right after the migrations: its rows are
-- dropped here so that the new columns can be NOT NULL without a default.
DELETE FROM agentlab_sched.statuses;
ALTER TABLE agentlab_sched.statuses
    ADD COLUMN is_failure boolean NOT NULL,
    ADD COLUMN is_interrupted boolean NOT NULL,
    ADD COLUMN is_error_free boolean NOT NULL,
    ADD COLUMN cron_status text,
    ADD CONSTRAINT statuses_flags_check CHECK ((is_final OR NOT is_failure) AND (is_held OR NOT is_interrupted)
                                               AND (kind = 'run') = (cron_status IS NOT NULL));
