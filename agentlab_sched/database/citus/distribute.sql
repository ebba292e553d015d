-- The Citus step of `migrate` (docs/scaling.md, "Past one PostgreSQL: Citus"): run after the
-- migrations and sql/, and only on a database where the citus extension is installed
-- (database/citus_step.py checks); never on plain PostgreSQL. It makes pg_temp.citus_distribute(),
-- which migrate calls once and which is gone with the session.
--
-- Driven by two lists, each table taken only if it exists and Citus does not manage it yet, so running it
-- again changes nothing and it works on whatever shape the migrations gave the tables (plain or
-- partitioned by time: Citus distributes a partitioned table with its partitions):
-- - reference tables: a copy on every node, read by every statement, written by migrate or rarely;
-- - distributed tables, by the schedule id, all colocated: what one schedule writes stays on one node.
-- Every table not listed stays local to the coordinator, for the reasons docs/scaling.md gives.
--
-- What Citus requires of a distributed table is done first, by citus_fit_keys(), kept apart so that it
-- follows the schema it finds: every primary key and unique constraint must include the distribution
-- column (it is added in front of the columns), and identity columns must be bigint (they are).

-- Citus warns that functions of pg_temp are made on this node only, and notices every table it copies:
-- for the rest of migrate's transaction (this step is its last), only errors reach the caller.
SET LOCAL client_min_messages = error;

CREATE OR REPLACE FUNCTION pg_temp.citus_reference_tables() RETURNS SETOF regclass
LANGUAGE sql STABLE
AS $$
    SELECT to_regclass(name) FROM (VALUES
        ('agentlab_sched.messages'),
        ('agentlab_sched.error_codes'),
        ('agentlab_sched.schedule_options'),
        ('agentlab_sched.statuses'),
        ('agentlab_sched.config'),
        -- Written by workers at run time (register_tasks, begin_code_sync): PL/pgSQL with the time a
        -- value, which Citus plans (a SQL-language function's parameters it cannot).
        ('agentlab_sched.known_tasks'),
        ('agentlab_sched.code_deployments')
    ) AS t(name)
    WHERE to_regclass(name) IS NOT NULL
$$;

-- (table, distribution column), the first one the colocation group the others join.
CREATE OR REPLACE FUNCTION pg_temp.citus_distributed_tables() RETURNS TABLE (rel regclass, key name)
LANGUAGE sql STABLE
AS $$
    SELECT to_regclass(name), key::name FROM (VALUES
        (1, 'agentlab_sched.schedule_changes', 'schedule_id')
    ) AS t(position, name, key)
    WHERE to_regclass(name) IS NOT NULL
    ORDER BY position
$$;

-- Whether Citus manages `rel` already (as any kind of table).
CREATE OR REPLACE FUNCTION pg_temp.citus_managed(rel regclass) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = rel)
$$;

-- Make every primary key and unique constraint of `rel` that lacks `key` include it (in front): Citus
-- enforces uniqueness within a shard only. The constraint keeps its name. Returns the names changed.
CREATE OR REPLACE FUNCTION pg_temp.citus_fit_keys(rel regclass, key name) RETURNS SETOF name
LANGUAGE plpgsql
AS $$
DECLARE
    c record;
    attnum smallint;
BEGIN
    SELECT a.attnum INTO attnum FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = key;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET NOT NULL', rel, key);
    FOR c IN
        SELECT con.conname, con.contype,
               (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY k.i)
                FROM unnest(con.conkey) WITH ORDINALITY AS k(num, i)
                JOIN pg_attribute a ON a.attrelid = rel AND a.attnum = k.num) AS columns
        FROM pg_constraint con
        WHERE con.conrelid = rel AND con.contype IN ('p', 'u') AND NOT attnum = ANY (con.conkey)
        ORDER BY con.conname
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', rel, c.conname);
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s (%I, %s)', rel, c.conname,
                       CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'UNIQUE' END, key, c.columns);
        RETURN NEXT c.conname;
    END LOOP;
END
$$;

-- Apply both lists: one row per table this call handed to Citus, with what it became.
CREATE OR REPLACE FUNCTION pg_temp.citus_distribute() RETURNS TABLE (table_name text, placement text)
LANGUAGE plpgsql
AS $$
DECLARE
    rel regclass;
    key name;
    colocate regclass;
BEGIN
    FOR rel IN SELECT * FROM pg_temp.citus_reference_tables() LOOP
        CONTINUE WHEN pg_temp.citus_managed(rel);
        PERFORM create_reference_table(rel);
        -- The rows were copied to the shards; the coordinator's own copy is no longer read.
        PERFORM truncate_local_data_after_distributing_table(rel);
        table_name := rel::text;
        placement := 'reference';
        RETURN NEXT;
    END LOOP;
    FOR rel, key IN SELECT * FROM pg_temp.citus_distributed_tables() LOOP
        IF NOT pg_temp.citus_managed(rel) THEN
            PERFORM pg_temp.citus_fit_keys(rel, key);
            PERFORM create_distributed_table(rel, key, colocate_with := coalesce(colocate::text, 'default'));
            PERFORM truncate_local_data_after_distributing_table(rel);
            table_name := rel::text;
            placement := format('distributed by %s', key);
            RETURN NEXT;
        END IF;
        colocate := coalesce(colocate, rel);
    END LOOP;
END
$$;
