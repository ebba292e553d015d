-- The partitions of the history tables and retention by partition (docs/scaling.md, docs/operations.md).
--
-- Each table that grows with time is partitioned by RANGE of a time column, a partition a day or a month,
-- in schema agentlab_sched_history, plus a DEFAULT partition for a row whose period has none yet.
-- ensure_partitions() makes the partitions of the next periods ahead and gives every row found in a
-- DEFAULT partition one of its own; prune() drops whole partitions past the retention (DETACH, DROP).

-- The partitioned history tables: the partition key, the period of a partition and how many periods
-- ahead of now housekeeping keeps made. A day for the tables written once or more per fire; a month for
-- the audit of schedule definitions, written per change. Two days ahead: housekeeping makes them every
-- 10 minutes, so that is hundreds of chances, and a row that finds none still lands in the DEFAULT
-- partition. No more: a statement that cannot prune by time (a run by its job, say) opens every partition
-- and its indexes, and the empty ones ahead cost as much as the full ones.
CREATE OR REPLACE FUNCTION agentlab_sched.history_tables()
RETURNS TABLE (name text, key text, period text, ahead integer)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    VALUES ('fires', 'fire_at', 'day', 2), ('runs', 'created_at', 'day', 2),
           ('outbox', 'run_created_at', 'day', 2), ('deliveries', 'attempted_at', 'day', 2),
           ('schedule_changes', 'changed_at', 'month', 1)
$$;

-- Every partition of the history tables with its bounds (NULL: MINVALUE), the DEFAULT ones flagged.
CREATE OR REPLACE FUNCTION agentlab_sched.history_partitions()
RETURNS TABLE (parent text, part text, lower_bound timestamptz, upper_bound timestamptz, is_default boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT h.name, c.relname,
           substring(b.bound FROM 'FROM \(''([^'']+)''\)')::timestamptz,
           substring(b.bound FROM 'TO \(''([^'']+)''\)')::timestamptz,
           b.bound = 'DEFAULT'
    FROM agentlab_sched.history_tables() h
    JOIN pg_catalog.pg_inherits i ON i.inhparent = format('agentlab_sched.%I', h.name)::regclass
    JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (SELECT pg_catalog.pg_get_expr(c.relpartbound, c.oid) AS bound) b
$$;

-- The partition of `tbl` for the period starting at `start` (UTC), unless one covers it already. Rows of
-- that period in the DEFAULT partition move into it first (ATTACH would refuse them); a CHECK matching the
-- bound spares the ATTACH its scan. Returns how many rows moved, NULL when nothing was made.
CREATE OR REPLACE FUNCTION agentlab_sched.create_partition(tbl text, key text, period text, start timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    finish timestamptz := start + ('1 ' || period)::interval;
    pname text := tbl || '_p' || to_char(start AT TIME ZONE 'UTC', CASE period WHEN 'day' THEN 'YYYYMMDD' ELSE 'YYYYMM' END);
    moved bigint;
    ix record;
BEGIN
    IF to_regclass(format('agentlab_sched_history.%I', pname)) IS NOT NULL
       OR EXISTS (SELECT 1 FROM agentlab_sched.history_partitions() p
                  WHERE p.parent = tbl AND NOT p.is_default
                    AND coalesce(p.lower_bound, '-infinity') < finish AND p.upper_bound > start) THEN
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE TABLE agentlab_sched_history.%I (LIKE agentlab_sched.%I INCLUDING DEFAULTS '
                   'INCLUDING CONSTRAINTS INCLUDING GENERATED)', pname, tbl);
    -- The parent's indexes, named after it (a plan then says which one serves): ATTACH adopts them.
    FOR ix IN SELECT c.relname, pg_catalog.pg_get_indexdef(i.indexrelid) AS def
              FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
              WHERE i.indrelid = format('agentlab_sched.%I', tbl)::regclass
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conindid = i.indexrelid) LOOP
        EXECUTE regexp_replace(ix.def, '^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ ',
                               format('CREATE \1INDEX %I ON agentlab_sched_history.%I ', pname || '_' || ix.relname, pname));
    END LOOP;
    EXECUTE format('WITH moved AS (DELETE FROM agentlab_sched_history.%I d WHERE d.%I >= %L AND d.%I < %L '
                   'RETURNING d.*) INSERT INTO agentlab_sched_history.%I SELECT * FROM moved',
                   tbl || '_default', key, start, key, finish, pname);
    GET DIAGNOSTICS moved = ROW_COUNT;
    EXECUTE format('ALTER TABLE agentlab_sched_history.%I ADD CONSTRAINT %I CHECK (%I >= %L AND %I < %L)',
                   pname, pname || '_bound', key, start, key, finish);
    EXECUTE format('ALTER TABLE agentlab_sched.%I ATTACH PARTITION agentlab_sched_history.%I FOR VALUES FROM (%L) TO (%L)',
                   tbl, pname, start, finish);
    EXECUTE format('ALTER TABLE agentlab_sched_history.%I DROP CONSTRAINT %I', pname, pname || '_bound');
    RETURN moved;
END
$$;

-- Make the partitions of the current period and the `ahead` next ones of every history table, and one for
-- the period of each row found in a DEFAULT partition (the row moves there). Returns the partitions made
-- and the rows moved.
CREATE OR REPLACE FUNCTION agentlab_sched.ensure_partitions(now timestamptz DEFAULT now())
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h record;
    start timestamptz;
    moved bigint;
    n_made integer := 0;
    n_moved bigint := 0;
BEGIN
    FOR h IN SELECT * FROM agentlab_sched.history_tables() x
             WHERE (SELECT c.relkind FROM pg_catalog.pg_class c
                    WHERE c.oid = to_regclass(format('agentlab_sched.%I', x.name))) = 'p' LOOP
        FOR start IN
            SELECT date_trunc(h.period, now, 'UTC') + i * ('1 ' || h.period)::interval FROM generate_series(0, h.ahead) i
            UNION
            SELECT d.s FROM agentlab_sched.default_periods(h.name, h.key, h.period) d
        LOOP
            moved := agentlab_sched.create_partition(h.name, h.key, h.period, start);
            IF moved IS NOT NULL THEN
                n_made := n_made + 1;
                n_moved := n_moved + moved;
            END IF;
        END LOOP;
    END LOOP;
    RETURN jsonb_build_object('created', n_made, 'moved', n_moved);
END
$$;

-- The periods of the rows in the DEFAULT partition of `tbl`.
CREATE OR REPLACE FUNCTION agentlab_sched.default_periods(tbl text, key text, period text)
RETURNS TABLE (s timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT DISTINCT date_trunc(%L, d.%I, ''UTC'') FROM agentlab_sched_history.%I d',
                                period, key, tbl || '_default');
END
$$;

-- How many rows each history table holds in its DEFAULT partition, counted up to 100,000 (doctor stays
-- fast): a row there has no partition of its own yet; housekeeping gives it one.
CREATE OR REPLACE FUNCTION agentlab_sched.default_partition_rows()
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h record;
    n bigint;
    found jsonb := '{}'::jsonb;
BEGIN
    FOR h IN SELECT * FROM agentlab_sched.history_tables() x
             WHERE to_regclass(format('agentlab_sched_history.%I', x.name || '_default')) IS NOT NULL LOOP
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM agentlab_sched_history.%I LIMIT 100000) d',
                       h.name || '_default') INTO n;
        IF n > 0 THEN
            found := found || jsonb_build_object(h.name, n);
        END IF;
    END LOOP;
    RETURN found;
END
$$;

-- The database's retention (set_retention), NULL when none.
CREATE OR REPLACE FUNCTION agentlab_sched.retention() RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.value::interval FROM agentlab_sched.config c WHERE c.key = 'retention'
$$;

-- Keep this much history in this database (housekeeping prunes by it when the worker's
-- AGENTLAB_SCHED_RETENTION is not set); NULL: keep everything. At least a minute.
CREATE OR REPLACE FUNCTION agentlab_sched.set_retention(keep interval) RETURNS interval
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF keep IS NULL THEN
        DELETE FROM agentlab_sched.config c WHERE c.key = 'retention';
        RETURN NULL;
    END IF;
    IF keep < interval '1 minute' THEN
        PERFORM agentlab_sched.fail('retention.too_short', 'keep', jsonb_build_object(
            'field', jsonb_build_object('msg', 'run.field.retention'), 'seconds', extract(epoch FROM keep)::bigint));
    END IF;
    INSERT INTO agentlab_sched.config (key, value) VALUES ('retention', keep::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    RETURN keep;
END
$$;

-- Drop the tables of schema agentlab_sched_history that are no partition (an empty table the upgrade to
-- partitions left out, once nothing depends on it); one a view of someone else's still reads is kept, said
-- in a notice. Returns the tables dropped.
CREATE OR REPLACE FUNCTION agentlab_sched.drop_unattached_history() RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text;
    dropped text[] := '{}';
BEGIN
    FOR t IN SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'agentlab_sched_history' AND c.relkind = 'r' AND NOT c.relispartition LOOP
        BEGIN
            EXECUTE format('DROP TABLE agentlab_sched_history.%I', t);
            dropped := dropped || t;
        EXCEPTION WHEN dependent_objects_still_exist THEN
            RAISE NOTICE 'agentlab_sched_history.% is kept: other objects depend on it', t;
        END;
    END LOOP;
    RETURN dropped;
END
$$;
