-- Hardening (docs/security.md): bookkeeping marks, checked bookkeeping, audit of re-encryption,
-- approvals that keep the caller's label apart from who decided.

-- Bookkeeping updates of a schedule announced by the owner's functions: the count-down of remaining_runs
-- by a launch, the re-encryption of webhook ciphertext. The validation trigger treats such an update as
-- bookkeeping (no version bump, no audit row) only when it finds the mark of its own transaction; only the
-- owner can write a mark, unlike a session setting, which any caller can set.
CREATE UNLOGGED TABLE agentlab_sched.bookkeeping_marks (
    xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
    schedule_id bigint NOT NULL,
    kind text NOT NULL CHECK (kind IN ('countdown', 'rotate')),
    PRIMARY KEY (xact, schedule_id, kind)
);

ALTER TABLE agentlab_sched.schedules
    ADD CONSTRAINT schedules_consecutive_failures_check CHECK (consecutive_failures >= 0),
    ADD CONSTRAINT schedules_webhook_url_hint_check CHECK (
        webhook_url_hint IS NULL OR char_length(webhook_url_hint) <= 300);

-- Re-encrypting a webhook with the newest key is recorded, without being a change of the definition.
ALTER TABLE agentlab_sched.schedule_changes
    DROP CONSTRAINT schedule_changes_operation_check,
    ADD CONSTRAINT schedule_changes_operation_check CHECK (operation IN ('insert', 'update', 'delete', 'rotate'));

-- decided_by is the database role that decided (session_user); the name a caller gives is a label.
ALTER TABLE agentlab_sched.approvals
    ADD COLUMN decided_label text;
