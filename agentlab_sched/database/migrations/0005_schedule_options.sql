-- The schedule options as the database knows them: a copy of agentlab_sched/schedules/options.py written
-- by every migrate (like the message catalogue). The validation trigger checks each option by its row,
-- schedule() takes the defaults from it and alter_schedule() the fields `clear` may reset.
CREATE TABLE agentlab_sched.schedule_options (
    position integer NOT NULL UNIQUE,
    name text PRIMARY KEY,
    sql_type text NOT NULL,
    -- The default as text, read back with a cast to sql_type; NULL = "not set".
    default_value text,
    required boolean NOT NULL,
    clearable boolean NOT NULL,
    choices text[],
    min_value integer,
    max_value integer,
    max_length integer,
    one_word boolean NOT NULL,
    positive boolean NOT NULL
);
