-- Run statuses as SQL helpers: run_is_open(status), run_is_final(status), run_is_active(status) (queued
-- or running: a worker has the run or will), run_is_held(status) (waiting on a person),
-- run_is_failure(status) (failed, timed_out: counts towards pause_after_failures), run_is_troubled(status)
-- (a failure, or interrupted: suspended), run_is_error_free(status) (a run in it carries no error), and
-- run_cron_status(status), pg_cron's word for it (starting, running, succeeded, failed; NULL for no run
-- status).
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
    words text;
BEGIN
    FOR helper IN
        SELECT h.name, h.meaning,
               ARRAY(SELECT s.status FROM agentlab_sched.statuses s
                     WHERE s.kind = 'run' AND CASE h.name WHEN 'run_is_open' THEN s.is_open
                                                          WHEN 'run_is_final' THEN s.is_final
                                                          WHEN 'run_is_active' THEN s.is_open AND NOT s.is_held
                                                          WHEN 'run_is_held' THEN s.is_held
                                                          WHEN 'run_is_failure' THEN s.is_failure
                                                          WHEN 'run_is_troubled' THEN s.is_failure OR s.is_interrupted
                                                          WHEN 'run_is_error_free' THEN s.is_error_free END
                     ORDER BY s.position) AS statuses
        FROM (VALUES ('run_is_open', 'not ended: counts against overlap'),
                     ('run_is_final', 'ended: never changes again'),
                     ('run_is_active', 'queued or running: a worker has it or will'),
                     ('run_is_held', 'open, waiting on a person'),
                     ('run_is_failure', 'ended in failure: counts towards pause_after_failures'),
                     ('run_is_troubled', 'gone wrong: a failure, or interrupted (will not continue by itself)'),
                     ('run_is_error_free', 'one whose run carries no error')) AS h(name, meaning)
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

    -- pg_cron's word for a run status: one WHEN per word, with its statuses (in the table's order).
    SELECT string_agg(format('WHEN status OPERATOR(pg_catalog.=) ANY (%L::pg_catalog.text[]) THEN %L::pg_catalog.text',
                             w.statuses, w.word), ' ' ORDER BY w.first)
    INTO words
    FROM (SELECT s.cron_status AS word, array_agg(s.status ORDER BY s.position) AS statuses,
                 min(s.position) AS first
          FROM agentlab_sched.statuses s WHERE s.kind = 'run' GROUP BY s.cron_status) w;
    IF words IS NULL THEN
        RAISE EXCEPTION 'agentlab_sched.statuses has no run status for run_cron_status: migrate writes it first';
    END IF;
    EXECUTE 'CREATE OR REPLACE FUNCTION agentlab_sched.run_cron_status(status text) RETURNS text '
            'LANGUAGE sql IMMUTABLE PARALLEL SAFE '
            'RETURN CASE ' || words || ' END';
    COMMENT ON FUNCTION agentlab_sched.run_cron_status(text) IS
        'pg_cron''s word for a run status in cron.job_run_details, NULL for none (agentlab_sched/core/statuses.py).';
END
$$;

SELECT agentlab_sched.define_status_helpers();
