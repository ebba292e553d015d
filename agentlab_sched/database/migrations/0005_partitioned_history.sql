-- The tables that grow with time become partitioned by time (native RANGE partitioning): fires by fire_at,
-- runs by created_at, the outbox by its run's created_at, deliveries by attempted_at (a partition a day),
-- schedule_changes by changed_at (a partition a month). Retention then drops whole partitions
-- (sql/72_partitions.sql), never a bulk DELETE.
--
-- The existing table of each becomes the first partition of its new parent, bound from MINVALUE to the
-- end of the day (month) of its newest row (an empty one is dropped instead): a CHECK constraint matching the bound, validated before the
-- ATTACH, spares the ATTACH its scan, so no row moves. The cost is one index build per table (the primary
-- key gains the partition key) and one validating scan; the old rows then age out by retention. Each
-- parent has a DEFAULT partition, so a row whose time has no partition yet is still written.
--
-- Primary and unique keys include the partition key: fires_once (schedule_id, fire_at, kind) already
-- does; the outbox's once-only key gains run_created_at, which is its run's (one value per run). Foreign
-- keys between these tables (a fire's run, a run's fire, a notification's run, a delivery's outbox row, an
-- approval's run) are dropped: a key into a partitioned table must name its partition key, and a
-- partition referenced by another's rows could not be detached. What they did on delete is done by
-- retention, which drops the partitions of one period together.

CREATE SCHEMA IF NOT EXISTS agentlab_sched_history;
REVOKE ALL ON SCHEMA agentlab_sched_history FROM PUBLIC;

ALTER TABLE agentlab_sched.runs DROP CONSTRAINT runs_fire_fk;
ALTER TABLE agentlab_sched.fires DROP CONSTRAINT fires_run_id_fkey;
ALTER TABLE agentlab_sched.approvals DROP CONSTRAINT approvals_run_id_fkey;
ALTER TABLE agentlab_sched.outbox DROP CONSTRAINT outbox_run_id_fkey;
ALTER TABLE agentlab_sched.deliveries DROP CONSTRAINT deliveries_outbox_id_fkey;

-- The outbox's partition key: its run's created_at (a run's notifications are kept as long as the run).
ALTER TABLE agentlab_sched.outbox ADD COLUMN run_created_at timestamptz;
UPDATE agentlab_sched.outbox o SET run_created_at = coalesce(
    (SELECT r.created_at FROM agentlab_sched.runs r WHERE r.id = o.run_id), o.created_at);
ALTER TABLE agentlab_sched.outbox ALTER COLUMN run_created_at SET NOT NULL;
ALTER TABLE agentlab_sched.outbox DROP CONSTRAINT outbox_once;
ALTER TABLE agentlab_sched.outbox ADD CONSTRAINT outbox_once UNIQUE (run_id, event, segment, run_created_at);

DO $$
DECLARE
    t record;
    legacy regclass;
    bound timestamptz;
    trig record;
    fn record;
    ix record;
    max_id bigint;
    has_rows boolean;
BEGIN
    FOR t IN SELECT * FROM (VALUES
            ('fires', 'fire_at', 'day', 'bigint'), ('runs', 'created_at', 'day', 'uuid'),
            ('outbox', 'run_created_at', 'day', 'bigint'), ('deliveries', 'attempted_at', 'day', 'bigint'),
            ('schedule_changes', 'changed_at', 'month', 'bigint')) AS v(name, key, period, id_type) LOOP
        -- Triggers go (sql/ makes them again on the parent: a partition inherits the parent's), and so do
        -- functions whose arguments are the old table's row type (sql/ makes them again with the new one).
        FOR trig IN SELECT tg.tgname FROM pg_trigger tg
                    WHERE tg.tgrelid = format('agentlab_sched.%I', t.name)::regclass AND NOT tg.tgisinternal LOOP
            EXECUTE format('DROP TRIGGER %I ON agentlab_sched.%I', trig.tgname, t.name);
        END LOOP;
        FOR fn IN SELECT p.oid::regprocedure AS sig FROM pg_proc p
                  WHERE p.prorettype = format('agentlab_sched.%I', t.name)::regtype
                     OR format('agentlab_sched.%I', t.name)::regtype = ANY (p.proargtypes::oid[]) LOOP
            EXECUTE format('DROP FUNCTION %s', fn.sig);
        END LOOP;
        EXECUTE format('SELECT date_trunc(%L, max(%I), ''UTC'') + interval ''1 %s'' FROM agentlab_sched.%I',
                       t.period, t.key, t.period, t.name) INTO bound;
        bound := greatest(coalesce(bound, date_trunc(t.period, now(), 'UTC')),
                          date_trunc(t.period, now(), 'UTC') + ('1 ' || t.period)::interval);
        EXECUTE format('ALTER TABLE agentlab_sched.%I SET SCHEMA agentlab_sched_history', t.name);
        EXECUTE format('ALTER TABLE agentlab_sched_history.%I RENAME TO %I', t.name, t.name || '_legacy');
        legacy := format('agentlab_sched_history.%I', t.name || '_legacy')::regclass;
        -- The parent: the same columns, defaults, checks and identity (continuing the old numbering).
        EXECUTE format('CREATE TABLE agentlab_sched.%I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                       'INCLUDING GENERATED INCLUDING IDENTITY) PARTITION BY RANGE (%I)', t.name, legacy, t.key);
        IF t.id_type = 'bigint' THEN
            EXECUTE format('SELECT max(id) FROM %s', legacy) INTO max_id;
            EXECUTE format('ALTER TABLE %s ALTER COLUMN id DROP IDENTITY', legacy);
            IF max_id IS NOT NULL THEN
                PERFORM setval(pg_get_serial_sequence(format('agentlab_sched.%I', t.name), 'id'), max_id);
            END IF;
        END IF;
        -- The primary key gains the partition key, on both; the parent's other indexes are the old ones'.
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', legacy, t.name || '_pkey');
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I PRIMARY KEY (id, %I)', legacy, t.name || '_legacy_pkey', t.key);
        EXECUTE format('ALTER TABLE agentlab_sched.%I ADD PRIMARY KEY (id, %I)', t.name, t.key);
        FOR ix IN SELECT c.conname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
                  WHERE c.conrelid = legacy AND c.contype = 'u' LOOP
            EXECUTE format('ALTER TABLE agentlab_sched.%I ADD CONSTRAINT %I %s', t.name, ix.conname, ix.def);
        END LOOP;
        FOR ix IN SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i
                  WHERE i.indrelid = legacy
                    AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) LOOP
            EXECUTE replace(replace(ix.def, ' ON agentlab_sched_history.' || t.name || '_legacy ',
                                    ' ON agentlab_sched.' || t.name || ' '),
                            'CREATE INDEX agentlab_sched_history.', 'CREATE INDEX ');
            EXECUTE format('ALTER INDEX %s RENAME TO %I', ix.name, split_part(ix.name, '.', 2) || '_legacy');
        END LOOP;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', legacy) INTO has_rows;
        IF NOT has_rows THEN
            -- Nothing to keep: left out, and dropped by migrate once sql/ has made the views again on the
            -- parent (they depend on it until then).
            EXECUTE format('CREATE TABLE agentlab_sched_history.%I PARTITION OF agentlab_sched.%I DEFAULT',
                           t.name || '_default', t.name);
            CONTINUE;
        END IF;
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (%I IS NOT NULL AND %I < %L) NOT VALID',
                       legacy, t.name || '_legacy_bound', t.key, t.key, bound);
        EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', legacy, t.name || '_legacy_bound');
        EXECUTE format('ALTER TABLE agentlab_sched.%I ATTACH PARTITION %s FOR VALUES FROM (MINVALUE) TO (%L)',
                       t.name, legacy, bound);
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', legacy, t.name || '_legacy_bound');
        EXECUTE format('CREATE TABLE agentlab_sched_history.%I PARTITION OF agentlab_sched.%I DEFAULT',
                       t.name || '_default', t.name);
    END LOOP;
END
$$;

-- The foreign keys into tables that are not partitioned (a ledger row's schedule, a run's job).
ALTER TABLE agentlab_sched.fires ADD CONSTRAINT fires_schedule_id_fkey
    FOREIGN KEY (schedule_id) REFERENCES agentlab_sched.schedules (id) ON DELETE CASCADE;
ALTER TABLE agentlab_sched.runs ADD CONSTRAINT runs_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES public.procrastinate_jobs (id) ON DELETE SET NULL;
