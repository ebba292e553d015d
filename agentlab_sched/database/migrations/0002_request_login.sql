-- The login role that asked for a fire request: a request's inputs are checked at launch against the task
-- launched, with that role's privileges (requested_by is a label it may change). Requests made before
-- this column existed have none, and their inputs are refused for a task that checks its inputs.
ALTER TABLE agentlab_sched.fire_requests ADD COLUMN requested_login text;
ALTER TABLE agentlab_sched.fire_requests ALTER COLUMN requested_login SET DEFAULT session_user;
