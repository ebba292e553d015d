-- Where a schedule comes from, when not from a person at the SQL API or CLI (docs/coming-from.md):
-- imported_from: the job it was imported from ("pg_cron job 3 in postgres", "procrastinate periodic task
--   reports.weekly"), so a second import recognises it;
-- defined_in: where in code it is defined (schedules as code: "myapp.tasks:weekly (myapp/tasks.py:42)");
--   its definition is then changed only by a worker syncing that code (edits from SQL are refused);
-- code_version: the deployment (fingerprint of the declared schedules) that last wrote it;
-- code_removed_at: when a code-managed schedule disappeared from the code (it is then paused, not deleted).
ALTER TABLE agentlab_sched.schedules
    ADD COLUMN imported_from text,
    ADD COLUMN defined_in text,
    ADD COLUMN code_version text,
    ADD COLUMN code_removed_at timestamptz;

-- The deployments whose code declared schedules, by fingerprint, with the first time a worker running
-- each synced: the newer deployment (seen first later) wins, an older one never overwrites it.
CREATE TABLE agentlab_sched.code_deployments (
    fingerprint text PRIMARY KEY,
    first_seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The tasks of the app that declared them: a schedule of one of these that it no longer declares is gone.
    tasks text[] NOT NULL DEFAULT '{}',
    schedules text[] NOT NULL DEFAULT '{}'
);
