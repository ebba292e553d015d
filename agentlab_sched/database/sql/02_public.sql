-- Schema public, where Procrastinate lives, as the scheduler runs on it. Procrastinate's functions search
-- it (their path is pg_catalog, public, pg_temp: their SQL names its tables unqualified), and a function
-- or operator in it whose argument types fit better than pg_catalog's (a planted
-- public.unnest(procrastinate_job_to_defer_v1[])) would be called by them, with the rights of whoever
-- calls them: the owner, inside our functions. So the scheduler refuses to fire while another role may
-- create in public, or owns a function or operator there (one planted while it could).

-- What makes public unsafe: the roles besides the trusted ones that may create in it, and the functions
-- and operators in it those roles own (trusted: superusers, the owners of schemas public and
-- agentlab_sched and of Procrastinate's tables). NULL when there is nothing.
CREATE OR REPLACE FUNCTION agentlab_sched.public_hazard() RETURNS jsonb
LANGUAGE plpgsql STABLE  -- plpgsql: its plan is kept for the session (the tick asks every batch)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (WITH trusted AS (
        SELECT n.nspowner AS id FROM pg_catalog.pg_namespace n WHERE n.nspname IN ('public', 'agentlab_sched')
        UNION SELECT c.relowner FROM pg_catalog.pg_class c
              WHERE c.oid = pg_catalog.to_regclass('public.procrastinate_jobs')
        UNION SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolsuper
    ), creators AS (
        SELECT CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(g.grantee)::text END AS who
        FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) g
        WHERE n.nspname = 'public' AND g.privilege_type = 'CREATE' AND g.grantee NOT IN (SELECT id FROM trusted)
    ), planted AS (
        SELECT p.oid::regprocedure::text AS what FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND p.proowner NOT IN (SELECT id FROM trusted)
        UNION ALL
        SELECT o.oid::regoperator::text FROM pg_catalog.pg_operator o
        WHERE o.oprnamespace = 'public'::regnamespace AND o.oprowner NOT IN (SELECT id FROM trusted)
    )
    SELECT CASE WHEN EXISTS (SELECT 1 FROM creators) OR EXISTS (SELECT 1 FROM planted) THEN
        pg_catalog.jsonb_build_object(
            'who', (SELECT coalesce(pg_catalog.string_agg(who, ', ' ORDER BY who), '') FROM creators),
            'planted', (SELECT coalesce(pg_catalog.string_agg(what, ', ' ORDER BY what), '') FROM planted))
    END);
END
$$;

-- True, or refused (SQLSTATE 55000) while schema public is unsafe: migrate, the tick and requests call it.
CREATE OR REPLACE FUNCTION agentlab_sched.check_public() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    hazard jsonb := agentlab_sched.public_hazard();
BEGIN
    IF hazard IS NULL THEN
        RETURN true;
    END IF;
    IF hazard ->> 'who' <> '' THEN
        PERFORM agentlab_sched.fail('setup.public_writable', 'database', jsonb_build_object('who', hazard ->> 'who'));
    END IF;
    PERFORM agentlab_sched.fail('setup.public_planted', 'database', jsonb_build_object('objects', hazard ->> 'planted'));
    RETURN false;
END
$$;
