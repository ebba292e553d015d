-- Roles and privileges (database/roles.py, agentlab-sched roles create, doctor). The SQL functions called
-- are in database/sql/90_privileges.sql.

-- name: create_roles
-- Create the roles %(reader)s, %(admin)s and %(worker)s unless they exist, record and grant them; which
-- were created and which existed.
SELECT agentlab_sched.create_roles(%(reader)s::text, %(admin)s::text, %(worker)s::text) AS report

-- name: configured_roles
-- The roles recorded by create_roles (that still exist), by kind.
SELECT agentlab_sched.configured_role('reader') AS reader, agentlab_sched.configured_role('admin') AS admin,
       agentlab_sched.configured_role('worker') AS worker

-- name: public_creators
-- Who, besides its owner, may create objects in schema public (where Procrastinate lives): PUBLIC or roles.
SELECT CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(g.grantee)::text END AS who
FROM pg_catalog.pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) g
WHERE n.nspname = 'public' AND g.privilege_type = 'CREATE' AND g.grantee <> n.nspowner
ORDER BY 1

-- name: unpinned_procrastinate
-- Procrastinate's functions whose search_path migrate could not pin (not owned by its role), with owner.
SELECT p.oid::regprocedure::text AS name, pg_catalog.pg_get_userbyid(p.proowner)::text AS owner
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'procrastinate\_%'
  AND NOT coalesce('search_path=pg_catalog, public, pg_temp' = ANY (p.proconfig), false)
ORDER BY 1

-- name: schema_owner
-- The owner of schema agentlab_sched, and whether it is a superuser.
SELECT r.rolname::text AS owner, r.rolsuper AS superuser
FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
WHERE n.nspname = 'agentlab_sched'

-- name: privilege_holders
-- Who may do what (the CLI's refusal of a missing privilege names it): the functions of the admin and
-- worker roles, the roles recorded by create_roles, and the role asking.
SELECT agentlab_sched.role_functions('admin') AS admin_functions,
       agentlab_sched.role_functions('worker') AS worker_functions,
       agentlab_sched.configured_role('reader') AS reader, agentlab_sched.configured_role('admin') AS admin,
       agentlab_sched.configured_role('worker') AS worker
