-- The built-in tasks (agentlab_sched/tasks/): the session the sql task sets up before it runs a schedule's
-- command. The command itself is the user's text, sent by queries.run_command.

-- name: session_user
-- The login role of the sql task's connection (named when SET ROLE is refused).
SELECT session_user::text AS name

-- name: set_role
-- Act as role {username} (an identifier, quoted by the queries module) for the rest of the session.
SET ROLE {username}

-- name: set_statement_timeout
-- The sql task's statement timeout for the rest of the session, from an interval %(timeout)s.
SELECT set_config('statement_timeout', (extract(epoch FROM %(timeout)s::interval) * 1000)::bigint::text, false)
