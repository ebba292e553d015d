-- The built-in tasks (agentlab_sched/tasks/): the session the sql task sets up before it runs a schedule's
-- command, on a connection made as the schedule's role. The command itself is the user's text, sent by
-- queries.run_command.

-- name: statement_timeout_ms
-- The sql task's limit %(timeout)s (an interval's text) in milliseconds.
SELECT (extract(epoch FROM %(timeout)s::interval) * 1000)::bigint AS ms

-- name: set_statement_timeout
-- The server's statement_timeout for the rest of the session, %(ms)s milliseconds (the worker's backstop).
SELECT set_config('statement_timeout', %(ms)s::bigint::text, false)

-- name: terminate_backend
-- End the backend %(pid)s of a sql command that did not stop when cancelled (made as the same role).
SELECT pg_terminate_backend(%(pid)s)
