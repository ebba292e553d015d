-- The run lifecycle (docs/runs.md): what approvals, suspended runs, timeouts and retention need to remember.

-- When a run was last found suspended (its worker stopped heartbeating), and when it was asked to abort
-- (a timeout or a cancel), so that a task still running long after the abort is reported as such.
ALTER TABLE agentlab_sched.runs
    ADD COLUMN suspended_at timestamptz,
    ADD COLUMN abort_requested_at timestamptz,
    ADD COLUMN cancelled_by text;

-- The Procrastinate job of the segment that asked for approval (no foreign key: Procrastinate may delete
-- its jobs), so retention can remove every job of a run, not only its current one.
ALTER TABLE agentlab_sched.approvals
    ADD COLUMN job_id bigint;

CREATE INDEX approvals_pending_idx ON agentlab_sched.approvals (run_id) WHERE status = 'pending';
-- Suspended-run detection looks at running runs only.
CREATE INDEX runs_running_idx ON agentlab_sched.runs (job_id) WHERE status = 'running';
-- Retention walks finished runs oldest first.
CREATE INDEX runs_finished_idx ON agentlab_sched.runs (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled', 'timed_out');

-- housekeeping() takes parameters now (the clock, the stall window, the retention); the old
-- parameterless version would make a plain `housekeeping()` call ambiguous.
DROP FUNCTION IF EXISTS agentlab_sched.housekeeping();
