-- A sync of schedules defined in code leaves a mark for its transaction (schedule_id 0, kind code_sync):
-- the validation trigger lets that transaction, and only it, change what the code defines.
ALTER TABLE agentlab_sched.bookkeeping_marks
    DROP CONSTRAINT bookkeeping_marks_kind_check,
    ADD CONSTRAINT bookkeeping_marks_kind_check CHECK (kind IN ('countdown', 'rotate', 'code_sync'));
