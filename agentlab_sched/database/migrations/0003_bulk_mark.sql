-- schedule_many() validates its rows set-based and marks its insert (kind 'bulk', schedule_id 0) so that
-- the triggers do not validate each row again.
ALTER TABLE agentlab_sched.bookkeeping_marks DROP CONSTRAINT bookkeeping_marks_kind_check;
ALTER TABLE agentlab_sched.bookkeeping_marks ADD CONSTRAINT bookkeeping_marks_kind_check
    CHECK (kind IN ('countdown', 'rotate', 'code_sync', 'bulk'));
