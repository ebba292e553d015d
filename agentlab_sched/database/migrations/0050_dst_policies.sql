-- Per-schedule DST policies for fixed-time fires (docs/cron.md, "Daylight saving time"):
-- dst_gap: a time a DST gap skips fires at the first instant after the jump (shift) or not (skip);
-- dst_repeat: a once-an-hour fixed time in a repeated hour fires at its first occurrence, its last, or both.
ALTER TABLE agentlab_sched.schedules
    ADD COLUMN dst_gap text NOT NULL DEFAULT 'shift',
    ADD COLUMN dst_repeat text NOT NULL DEFAULT 'first',
    ADD CONSTRAINT schedules_dst_gap_check CHECK (dst_gap IN ('shift', 'skip')),
    ADD CONSTRAINT schedules_dst_repeat_check CHECK (dst_repeat IN ('first', 'last', 'both'));
