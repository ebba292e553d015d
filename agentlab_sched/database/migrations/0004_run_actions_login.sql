-- Who last acted on a run by hand (cancel_run, resume_run, abandon) as the database knows it: the login
-- role (session_user) and the database clock. cancelled_by stays the name the caller gave (a label).
ALTER TABLE agentlab_sched.runs ADD COLUMN acted_by_login text, ADD COLUMN acted_at timestamptz;
