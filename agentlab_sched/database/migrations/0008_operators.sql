-- Why a schedule was paused, when the system paused it (after failures, gone from the code, imported):
-- a message code and its parameters, rendered when read in the reader's language (paused_reason_text,
-- sql/26_schedule_fields.sql); paused_reason keeps a person's own words.
ALTER TABLE agentlab_sched.schedules ADD COLUMN paused_reason_code text, ADD COLUMN paused_reason_params jsonb;

-- code_schedule_gone() takes the schedule's name only: its reason is a message code now.
DROP FUNCTION IF EXISTS agentlab_sched.code_schedule_gone(text, text);
