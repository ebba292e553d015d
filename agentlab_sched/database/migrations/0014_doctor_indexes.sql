-- What doctor looks at, found by index instead of by reading every schedule or the whole outbox
-- (sql/75_doctor.sql). With a million schedules each full read of the table was about 260 MB, and doctor
-- made six of them; read cold (after the ledger filled the page cache) they took minutes.
--
-- Partial indexes on rows that are few where doctor has nothing to say: disabled schedules (paused), enabled
-- ones failing three times or more in a row, those with a webhook. Their predicates' columns change rarely
-- (consecutive_failures changes on a failure and on the success after one), so a schedule's usual updates
-- keep what they cost.
CREATE INDEX schedules_disabled_idx ON agentlab_sched.schedules (name) WHERE NOT enabled;
CREATE INDEX schedules_failing_idx ON agentlab_sched.schedules (name) WHERE enabled AND consecutive_failures >= 3;
CREATE INDEX schedules_webhook_idx ON agentlab_sched.schedules (name) WHERE webhook_url_enc IS NOT NULL;
-- The distinct tasks of the enabled schedules, read one task at a time, and each one's first names
-- (unregistered tasks).
CREATE INDEX schedules_task_idx ON agentlab_sched.schedules (task, name) WHERE enabled;
-- The notifications given up on lately; the pending ones have outbox_pending_idx.
CREATE INDEX outbox_failed_idx ON agentlab_sched.outbox (created_at) WHERE status = 'failed';
