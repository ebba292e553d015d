-- Privileges: who may do what (docs/security.md).

-- Whether the session's login role may create or change a schedule of the built-in `sql` task that runs
-- its command as `run_as`: it holds EXECUTE on agentlab_sched.schedule_sql (the privilege, granted by the
-- owner) and is itself a member of `run_as` (nobody gains a role through a schedule). `run_as` may be
-- neither a superuser nor the owner of schema agentlab_sched: a worker host, which must be granted
-- `run_as` to carry the command out, never holds their rights.
CREATE OR REPLACE FUNCTION agentlab_sched.may_schedule_sql(run_as text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    target pg_catalog.pg_roles;
BEGIN
    SELECT * INTO target FROM pg_catalog.pg_roles r WHERE r.rolname = run_as;
    IF NOT FOUND OR target.rolsuper
       OR target.oid = (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'agentlab_sched') THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace = 'agentlab_sched'::pg_catalog.regnamespace AND p.proname = 'schedule_sql'
                     AND pg_catalog.has_function_privilege(session_user, p.oid, 'EXECUTE'))
           AND pg_catalog.pg_has_role(session_user, target.oid, 'MEMBER');
END
$$;
