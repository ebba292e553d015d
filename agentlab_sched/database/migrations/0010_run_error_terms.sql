-- The error the system writes on a run (a refused launch, interrupted or suspended, timed out, rejected,
-- abandoned, cancelled) as a term: {"msg": message code, "params": its parameters}, rendered when read in
-- the reader's language (run_error_text, sql/51_run_common.sql). A task's own words have no term and
-- read as written (runs.error). Added on the partitioned parent: every partition has it.
ALTER TABLE agentlab_sched.runs ADD COLUMN error_term jsonb;

-- record_task_error() takes the error's parameters too: the four-argument form is replaced.
DROP FUNCTION IF EXISTS agentlab_sched.record_task_error(uuid, bigint, text, text);
