-- schedule_many() tells the write triggers that its insert was validated already by a key only the owner
-- can set (sql/26_schedule_fields.sql, in_bulk_insert()): this session's value of this sequence, set to
-- the transaction's id for the time of the insert. Reading it costs no query per row, where the bulk mark
-- (a row of bookkeeping_marks, looked up once per inserted row by each write trigger) cost more than the
-- insert itself. No role but the owner has a privilege on it.
CREATE SEQUENCE agentlab_sched.bulk_insert_key AS bigint MINVALUE 0 START WITH 0;
REVOKE ALL ON SEQUENCE agentlab_sched.bulk_insert_key FROM PUBLIC;

-- The bulk mark is no longer written.
DELETE FROM agentlab_sched.bookkeeping_marks WHERE kind = 'bulk';
ALTER TABLE agentlab_sched.bookkeeping_marks DROP CONSTRAINT bookkeeping_marks_kind_check;
ALTER TABLE agentlab_sched.bookkeeping_marks ADD CONSTRAINT bookkeeping_marks_kind_check
    CHECK (kind IN ('countdown', 'rotate', 'code_sync'));

-- The schedules whose fires were refused, found without reading every schedule's latest fires (doctor's
-- refused fires: sql/75_doctor.sql). Partial: a refusal is rare, so the ledger's inserts barely pay for it.
CREATE INDEX fires_refused_idx ON agentlab_sched.fires (schedule_id, fire_at DESC) WHERE status = 'failed_to_start';
