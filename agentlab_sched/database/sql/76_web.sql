-- What the web dashboard's schedule filters select: one definition for its page of schedules and for a bulk
-- pause or resume of everything the filters select (queries/web.sql: web_schedules, web_schedule_names).
--
-- A set-returning SQL function with an SQL-standard body and no SET clause, so PostgreSQL inlines it into
-- the query that calls it: its conditions become the caller's, the given values fold the ones that do not
-- apply (a NULL filter), and the indexes serve what is left (the name index for the order, the trigram
-- index on lower(name) and lower(task) where pg_trgm is installed: migrations/0006_web.sql). Its names are
-- bound when it is made (schema-qualified, operators by schema), so no search_path can change what it
-- means (docs/security.md). It runs with the caller's rights: a reader sees what a reader may read.

CREATE OR REPLACE FUNCTION agentlab_sched.web_schedules_matching(want_status text, want_task text, want_text text)
RETURNS TABLE (id bigint, name text)
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT s.id, s.name
    FROM agentlab_sched.schedules s
    WHERE (want_task IS NULL OR s.task OPERATOR(pg_catalog.=) want_task)
      AND (want_text IS NULL
           OR pg_catalog.lower(s.name) OPERATOR(pg_catalog.~~) agentlab_sched.like_part(want_text)
           OR pg_catalog.lower(s.task) OPERATOR(pg_catalog.~~) agentlab_sched.like_part(want_text))
      AND (want_status IS NULL
           OR (want_status OPERATOR(pg_catalog.=) 'active' AND s.enabled)
           OR (want_status OPERATOR(pg_catalog.=) 'paused' AND NOT s.enabled)
           OR (want_status OPERATOR(pg_catalog.=) 'failing' AND s.consecutive_failures OPERATOR(pg_catalog.>) 0)
           OR (want_status OPERATOR(pg_catalog.=) 'overdue'
               AND s.id IN (SELECT o.id FROM agentlab_sched.overdue o
                            WHERE o.problem OPERATOR(pg_catalog.=) ANY (ARRAY['late', 'unplanned'])))
           OR (want_status OPERATOR(pg_catalog.=) 'stopped'
               AND s.id IN (SELECT o.id FROM agentlab_sched.overdue o WHERE o.problem OPERATOR(pg_catalog.=) 'stopped'))
           OR (want_status OPERATOR(pg_catalog.=) 'code' AND s.defined_in IS NOT NULL));
END;
