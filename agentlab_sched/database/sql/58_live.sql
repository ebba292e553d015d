-- Live updates of the dashboard (agentlab_sched/web/live.py): a NOTIFY on agentlab_sched_live when a
-- statement wrote fires or runs. Statement-level, so a tick that writes a thousand fires sends one; the
-- payload is the table's name only, and PostgreSQL folds the same (channel, payload) sent again in one
-- transaction into one notification. A statement that wrote no row (housekeeping's UPDATEs that found
-- nothing) sends none: the transition table says how many rows it wrote. Valid on a partitioned table
-- too (a statement trigger with a transition table on the parent).

CREATE OR REPLACE FUNCTION agentlab_sched.live_notify() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM written) THEN
        PERFORM pg_notify('agentlab_sched_live', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
$$;

-- A transition table allows one event per trigger: inserts and updates of runs are two.
CREATE OR REPLACE TRIGGER fires_live
    AFTER INSERT ON agentlab_sched.fires
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION agentlab_sched.live_notify();

CREATE OR REPLACE TRIGGER runs_live_insert
    AFTER INSERT ON agentlab_sched.runs
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION agentlab_sched.live_notify();

CREATE OR REPLACE TRIGGER runs_live_update
    AFTER UPDATE ON agentlab_sched.runs
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION agentlab_sched.live_notify();
