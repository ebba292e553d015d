-- Run statuses as SQL helpers: run_is_open(status), run_is_final(status), run_is_active(status) (queued
-- or running: a worker has the run or will) and run_is_held(status) (waiting on a person).
--
-- Made from agentlab_sched.statuses, the copy of agentlab_sched/core/statuses.py that migrate writes just
-- before it applies sql/: each helper is an IMMUTABLE SQL function with its list written into its body,
-- so PostgreSQL inlines it into the query that calls it (`r.status = ANY ('{queued,...}')`), and a partial
-- index whose predicate lists the same statuses (runs_open_idx, runs_finished_idx) serves that query.
-- They are the only functions of the schema without a pinned search_path (a SET clause would stop the
-- inlining): their body names its operator and type by schema (OPERATOR(pg_catalog.=), pg_catalog.text),
-- so no search_path can change what it means.

CREATE OR REPLACE FUNCTION agentlab_sched.define_status_helpers() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    helper record;
BEGIN
    FOR helper IN
        SELECT h.name, h.meaning,
               ARRAY(SELECT s.status FROM agentlab_sched.statuses s
                     WHERE s.kind = 'run' AND CASE h.name WHEN 'run_is_open' THEN s.is_open
                                                          WHEN 'run_is_final' THEN s.is_final
                                                          WHEN 'run_is_active' THEN s.is_open AND NOT s.is_held
                                                          ELSE s.is_held END
                     ORDER BY s.position) AS statuses
        FROM (VALUES ('run_is_open', 'not ended: counts against overlap'),
                     ('run_is_final', 'ended: never changes again'),
                     ('run_is_active', 'queued or running: a worker has it or will'),
                     ('run_is_held', 'open, waiting on a person')) AS h(name, meaning)
    LOOP
        IF cardinality(helper.statuses) = 0 THEN
            RAISE EXCEPTION 'agentlab_sched.statuses has no run status for %: migrate writes it first', helper.name;
        END IF;
        EXECUTE format(
            'CREATE OR REPLACE FUNCTION agentlab_sched.%I(status text) RETURNS boolean '
            'LANGUAGE sql IMMUTABLE PARALLEL SAFE '
            'RETURN status OPERATOR(pg_catalog.=) ANY (%L::pg_catalog.text[])',
            helper.name, helper.statuses);
        EXECUTE format('COMMENT ON FUNCTION agentlab_sched.%I(text) IS %L', helper.name,
                       'Whether a run status is ' || helper.meaning || ' (agentlab_sched/core/statuses.py).');
    END LOOP;
END
$$;

SELECT agentlab_sched.define_status_helpers();
