-- Runs follow their Procrastinate jobs in every path (sql/50_runs.sql): deleted jobs, retries, aborts
-- nobody asked for, failures counted once per run.

ALTER TABLE agentlab_sched.runs
    -- What the task's body did in the job's current attempt, as the run middleware saw it just before
    -- Procrastinate finished the job ('succeeded', 'failed', 'aborted'): what the run becomes when the
    -- job is deleted instead of finished (procrastinate worker --delete-jobs).
    ADD COLUMN outcome text,
    -- The schedule's failure_epoch when this run's failure was counted: a run counts once, however
    -- many attempts fail, until a success resets the count.
    ADD COLUMN counted_epoch integer,
    -- A success or failure of the run not yet counted against its schedule, because the schedules
    -- table was locked when the job finished (finishing a job never waits on it); housekeeping counts it.
    ADD COLUMN tally_pending text,
    ADD CONSTRAINT runs_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'aborted')),
    ADD CONSTRAINT runs_tally_pending_check CHECK (tally_pending IN ('success', 'failure'));

-- Bumped whenever consecutive_failures goes back to 0 (a success, a resume).
ALTER TABLE agentlab_sched.schedules
    ADD COLUMN failure_epoch integer NOT NULL DEFAULT 0;

CREATE INDEX runs_tally_pending_idx ON agentlab_sched.runs (schedule_id, finished_at) WHERE tally_pending IS NOT NULL;
-- The open runs of a schedule that wait for their first start (buffer_one keeps at most one).
CREATE INDEX runs_waiting_idx ON agentlab_sched.runs (schedule_id) WHERE status = 'queued' AND started_at IS NULL;

-- buffer_one no longer gives its jobs a queueing lock (Procrastinate's retry of the running job would
-- collide with the waiting job's): jobs deferred before keep none either.
UPDATE public.procrastinate_jobs SET queueing_lock = NULL
WHERE queueing_lock ~ '^agentlab_sched:[0-9]+$' AND status IN ('todo', 'doing');

-- Writing a run's notification must not wait on the schedules table either (a job is being finished):
-- no foreign key from the outbox to schedules (its check would take the schedule's row); deleting a
-- schedule still removes its notifications (sql/60_notify.sql), and the dispatcher drops a row whose
-- schedule is gone.
ALTER TABLE agentlab_sched.outbox DROP CONSTRAINT outbox_schedule_id_fkey;
CREATE INDEX outbox_schedule_idx ON agentlab_sched.outbox (schedule_id);
