-- on_interrupt: what a run does when its worker stops under it (sql/50_runs.sql, interrupt_run), and how
-- many times a run was run again for it.
ALTER TABLE agentlab_sched.schedules
    ADD COLUMN on_interrupt text NOT NULL DEFAULT 'suspend',
    ADD CONSTRAINT schedules_on_interrupt_check CHECK (on_interrupt IN ('suspend', 'retry', 'abandon'));

ALTER TABLE agentlab_sched.runs
    ADD COLUMN interrupts integer NOT NULL DEFAULT 0;
