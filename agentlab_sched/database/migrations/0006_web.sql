-- The dashboard's lists (queries/web.sql, queries/runs.sql).

-- Runs newest first, a page at a time by keyset (list_runs): the index gives the order, so a page reads
-- its rows and no more. A plain CREATE INDEX, valid on a partitioned table too.
CREATE INDEX runs_created_idx ON agentlab_sched.runs (created_at DESC, id DESC);

-- The schedules page's text filter (a part of the name or task, any case: lower(...) LIKE like_part(...)).
-- Where the server ships pg_trgm, a trigram index finds the matches without reading every schedule; it is
-- created here if it is not installed yet and the migrating role may (it is a trusted extension). Where it
-- is missing (the embedded server ships none), the filter reads the schedules table once, whatever the
-- text. Installing pg_trgm later and creating the index by hand, as below, gives the same.
DO $$
DECLARE
    nsp text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_trgm')
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION pg_trgm WITH SCHEMA public;
        EXCEPTION WHEN insufficient_privilege OR invalid_schema_name THEN
            RAISE NOTICE 'pg_trgm not installed (%): the schedules text filter reads every schedule', SQLERRM;
        END;
    END IF;
    SELECT n.nspname INTO nsp FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    IF nsp IS NOT NULL THEN
        EXECUTE format('CREATE INDEX schedules_text_idx ON agentlab_sched.schedules '
                       'USING gin (lower(name) %1$I.gin_trgm_ops, lower(task) %1$I.gin_trgm_ops)', nsp);
    END IF;
END
$$;
