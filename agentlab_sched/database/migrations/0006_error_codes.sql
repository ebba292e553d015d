-- The error registry as the database knows it: a copy of agentlab_sched/errors.py's REGISTRY written by
-- every migrate. agentlab_sched.fail() takes the SQLSTATE of a code from here (22023 for the others).
CREATE TABLE agentlab_sched.error_codes (
    code text PRIMARY KEY,
    sqlstate text NOT NULL CHECK (sqlstate ~ '^[0-9A-Z]{5}$')
);
