-- agentlab-sched's tables as they stand today, each in one place: columns, constraints and indexes.
-- This file is for reading; `migrate` applies migrations/ (0001_schema.sql and the ones after it).
-- A change of a table is a new migration AND the same change here: tests/database/test_schema_chain.py
-- builds the schema both ways and names every difference (tables, columns, constraints, indexes,
-- triggers, functions). Functions, triggers and views live in sql/.

CREATE SCHEMA IF NOT EXISTS agentlab_sched;
-- The partitions of the history tables (sql/72_partitions.sql makes and drops them): the tables that grow
-- with time are partitioned by time, a partition a day (fires, runs, outbox, deliveries) or a month
-- (schedule_changes), each with a DEFAULT partition that takes a row whose period has none yet.
CREATE SCHEMA IF NOT EXISTS agentlab_sched_history;
REVOKE ALL ON SCHEMA agentlab_sched_history FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------------
-- Copies of Python definitions, written anew by every migrate, so that SQL says what Python says.

-- The message catalogue (agentlab_sched/messages): SQL renders the same words as Python.
CREATE TABLE agentlab_sched.messages (
    code text NOT NULL,
    locale text NOT NULL,
    template text NOT NULL,
    PRIMARY KEY (code, locale)
);

-- Deployment settings the database needs without an environment (locale, windows), and the limits and
-- policy numbers of agentlab_sched/limits.py (limit.<name>).
CREATE TABLE agentlab_sched.config (
    key text PRIMARY KEY,
    value text NOT NULL
);

-- The error registry (agentlab_sched/errors.py's REGISTRY). agentlab_sched.fail() takes the SQLSTATE of a
-- code from here (22023 for the others).
CREATE TABLE agentlab_sched.error_codes (
    code text PRIMARY KEY,
    sqlstate text NOT NULL CHECK (sqlstate ~ '^[0-9A-Z]{5}$')
);

-- The schedule options (agentlab_sched/core/options.py). The validation trigger checks each option by its
-- row, schedule() takes the defaults from it and alter_schedule() the fields `clear` may reset.
CREATE TABLE agentlab_sched.schedule_options (
    position integer NOT NULL UNIQUE,
    name text PRIMARY KEY,
    sql_type text NOT NULL,
    -- The default as text, read back with a cast to sql_type; NULL = "not set".
    default_value text,
    required boolean NOT NULL,
    clearable boolean NOT NULL,
    choices text[],
    min_value integer,
    max_value integer,
    max_length integer,
    one_word boolean NOT NULL,
    positive boolean NOT NULL
);

-- The run and fire statuses (agentlab_sched/core/statuses.py): sql/01_statuses.sql makes the helpers
-- run_is_open(), run_is_final(), run_is_active(), run_is_held(), run_is_failure(), run_is_troubled(),
-- run_is_error_free() and run_cron_status() from it.
CREATE TABLE agentlab_sched.statuses (
    kind text NOT NULL CHECK (kind IN ('run', 'fire')),
    status text NOT NULL,
    position integer NOT NULL UNIQUE,
    is_open boolean NOT NULL,
    is_final boolean NOT NULL,
    is_held boolean NOT NULL,
    is_failure boolean NOT NULL,
    is_interrupted boolean NOT NULL,
    is_error_free boolean NOT NULL,
    -- pg_cron's word for a run status (cron.job_run_details); NULL for a fire.
    cron_status text,
    PRIMARY KEY (kind, status),
    CONSTRAINT statuses_open_or_final_check CHECK (NOT (is_open AND is_final) AND (is_open OR NOT is_held)),
    CONSTRAINT statuses_flags_check CHECK ((is_final OR NOT is_failure) AND (is_held OR NOT is_interrupted)
                                           AND (kind = 'run') = (cron_status IS NOT NULL))
);

-- ---------------------------------------------------------------------------------------------------
-- Schedules.

CREATE TABLE agentlab_sched.schedules (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE,
    cron text NOT NULL,
    timezone text NOT NULL DEFAULT 'UTC',
    task text NOT NULL,
    inputs jsonb NOT NULL DEFAULT '{}'::jsonb,
    queue text NOT NULL DEFAULT 'default',
    priority integer NOT NULL DEFAULT 0,
    overlap text NOT NULL DEFAULT 'skip',
    misfire_grace interval NOT NULL DEFAULT interval '1 hour',
    timeout interval,
    enabled boolean NOT NULL DEFAULT true,
    catchup text NOT NULL DEFAULT 'latest',
    max_catchup integer NOT NULL DEFAULT 10,
    starts_at timestamptz,
    ends_at timestamptz,
    remaining_runs integer,
    pause_after_failures integer,
    consecutive_failures integer NOT NULL DEFAULT 0,
    paused_reason text,
    paused_at timestamptz,
    context text NOT NULL DEFAULT 'isolated',
    session_key text,
    next_run_at timestamptz,
    -- Set when a worker must (re)compute next_run_at, which only Python can (cron is evaluated there):
    -- 'now' = the first due time after now (new, enabled, resumed); 'pending' = continue from the pending
    -- due time next_run_at, inclusive (cron or time zone changed).
    replan text DEFAULT 'now' CHECK (replan IN ('now', 'pending')),
    version integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Notifications (docs/notifications.md). URL and secret are ciphertext (Fernet), never plaintext.
    webhook_format text,
    webhook_url_enc text,
    webhook_secret_enc text,
    webhook_url_hint text,
    webhook_events text[] NOT NULL DEFAULT ARRAY['finished', 'failed'],
    -- Bumped whenever consecutive_failures goes back to 0 (a success, a resume): a run's failure counts
    -- once per epoch (runs.counted_epoch).
    failure_epoch integer NOT NULL DEFAULT 0,
    -- What a run does when its worker stops under it (sql/50_runs.sql, interrupt_run).
    on_interrupt text NOT NULL DEFAULT 'suspend',
    -- The moment a re-plan was asked for (created, resumed, cron or time zone changed): the next fire is
    -- planned after it, not after the tick that happens to plan it.
    replan_at timestamptz,
    -- A worker running the resolvers of a schedule's fires (outside any transaction) leases it until
    -- then, so other workers do not claim it meanwhile; the lease ends when the fire is applied, or by
    -- itself.
    resolving_until timestamptz,
    -- Whether a webhook URL and a secret are set, as columns of their own: the reader role may read every
    -- column except the ciphertext (docs/security.md), and still see whether it is set.
    webhook_configured boolean GENERATED ALWAYS AS (webhook_url_enc IS NOT NULL) STORED,
    webhook_has_secret boolean GENERATED ALWAYS AS (webhook_secret_enc IS NOT NULL) STORED,
    -- DST policies for fixed-time fires (docs/cron.md, "Daylight saving time"): a time a DST gap skips
    -- fires at the first instant after the jump (shift) or not (skip); a once-an-hour fixed time in a
    -- repeated hour fires at its first occurrence, its last, or both.
    dst_gap text NOT NULL DEFAULT 'shift',
    dst_repeat text NOT NULL DEFAULT 'first',
    -- Where a schedule comes from, when not from a person at the SQL API or CLI (docs/coming-from.md):
    -- imported_from: the job it was imported from ("pg_cron job 3 in postgres", "procrastinate periodic
    --   task reports.weekly"), so a second import recognises it;
    -- defined_in: where in code it is defined ("myapp.tasks:weekly (myapp/tasks.py:42)"); its definition
    --   is then changed only by a worker syncing that code (edits from SQL are refused);
    -- code_version: the deployment (fingerprint of the declared schedules) that last wrote it;
    -- code_removed_at: when a code-managed schedule disappeared from the code (it is then paused).
    imported_from text,
    defined_in text,
    code_version text,
    code_removed_at timestamptz,
    -- Why the system paused it (after failures, gone from the code, imported): a message code and its
    -- parameters, rendered when read (paused_reason_text); paused_reason keeps a person's own words.
    paused_reason_code text,
    paused_reason_params jsonb,
    CONSTRAINT schedules_name_check CHECK (
        char_length(name) BETWEEN 1 AND 200 AND name !~ '[[:cntrl:]]' AND name = btrim(name)),
    CONSTRAINT schedules_task_check CHECK (char_length(task) BETWEEN 1 AND 200 AND task !~ '\s'),
    CONSTRAINT schedules_inputs_check CHECK (jsonb_typeof(inputs) = 'object'),
    CONSTRAINT schedules_queue_check CHECK (char_length(queue) BETWEEN 1 AND 200),
    CONSTRAINT schedules_overlap_check CHECK (
        overlap IN ('skip', 'buffer_one', 'buffer_all', 'allow_all', 'cancel_other')),
    CONSTRAINT schedules_catchup_check CHECK (catchup IN ('latest', 'none', 'all')),
    CONSTRAINT schedules_context_check CHECK (context IN ('isolated', 'persistent')),
    CONSTRAINT schedules_misfire_grace_check CHECK (misfire_grace >= interval '0'),
    CONSTRAINT schedules_timeout_check CHECK (timeout IS NULL OR timeout > interval '0'),
    CONSTRAINT schedules_max_catchup_check CHECK (max_catchup BETWEEN 1 AND 1000),
    CONSTRAINT schedules_remaining_runs_check CHECK (remaining_runs IS NULL OR remaining_runs >= 0),
    CONSTRAINT schedules_pause_after_failures_check CHECK (
        pause_after_failures IS NULL OR pause_after_failures >= 1),
    CONSTRAINT schedules_consecutive_failures_check CHECK (consecutive_failures >= 0),
    CONSTRAINT schedules_window_check CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at),
    CONSTRAINT schedules_webhook_format_check CHECK (
        webhook_format IS NULL OR webhook_format IN ('generic', 'feishu', 'wecom', 'dingtalk')),
    CONSTRAINT schedules_webhook_events_check CHECK (
        webhook_events <@ ARRAY['finished', 'failed', 'awaiting_approval']),
    CONSTRAINT schedules_webhook_ciphertext_check CHECK (
        (webhook_url_enc IS NULL OR webhook_url_enc LIKE 'gAAAAA%')
        AND (webhook_secret_enc IS NULL OR webhook_secret_enc LIKE 'gAAAAA%')),
    CONSTRAINT schedules_webhook_url_hint_check CHECK (
        webhook_url_hint IS NULL OR char_length(webhook_url_hint) <= 300),
    CONSTRAINT schedules_on_interrupt_check CHECK (on_interrupt IN ('suspend', 'retry', 'abandon')),
    CONSTRAINT schedules_dst_gap_check CHECK (dst_gap IN ('shift', 'skip')),
    CONSTRAINT schedules_dst_repeat_check CHECK (dst_repeat IN ('first', 'last', 'both'))
);
-- The tick reads only what is due (and what a worker must plan): both partial, both tiny when idle.
CREATE INDEX schedules_due_idx ON agentlab_sched.schedules (next_run_at) WHERE enabled;
CREATE INDEX schedules_replan_idx ON agentlab_sched.schedules (id) WHERE replan IS NOT NULL;
CREATE INDEX schedules_leased_idx ON agentlab_sched.schedules (next_run_at) WHERE resolving_until IS NOT NULL;
-- What doctor looks at (sql/75_doctor.sql), found without reading every schedule.
CREATE INDEX schedules_disabled_idx ON agentlab_sched.schedules (name) WHERE NOT enabled;
CREATE INDEX schedules_failing_idx ON agentlab_sched.schedules (name) WHERE enabled AND consecutive_failures >= 3;
CREATE INDEX schedules_webhook_idx ON agentlab_sched.schedules (name) WHERE webhook_url_enc IS NOT NULL;
CREATE INDEX schedules_task_idx ON agentlab_sched.schedules (task, name) WHERE enabled;
-- The schedules page's text filter (queries/web.sql: a part of the name or task, any case).
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

-- The audit of schedule definitions: one row per change (and per re-encryption of a webhook, which is
-- recorded without being a change of the definition).
CREATE TABLE agentlab_sched.schedule_changes (
    id bigint GENERATED ALWAYS AS IDENTITY,
    schedule_id bigint NOT NULL,
    schedule_name text NOT NULL,
    operation text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    db_role text NOT NULL DEFAULT current_user,
    application_name text,
    old_values jsonb,
    new_values jsonb,
    PRIMARY KEY (id, changed_at),
    CONSTRAINT schedule_changes_operation_check CHECK (operation IN ('insert', 'update', 'delete', 'rotate'))
) PARTITION BY RANGE (changed_at);
CREATE TABLE agentlab_sched_history.schedule_changes_default PARTITION OF agentlab_sched.schedule_changes DEFAULT;
CREATE INDEX schedule_changes_schedule_idx ON agentlab_sched.schedule_changes (schedule_id, id);

-- Bookkeeping updates of a schedule announced by the owner's functions: the count-down of remaining_runs
-- by a launch, the re-encryption of webhook ciphertext, a sync of schedules defined in code (schedule_id
-- 0, kind code_sync). The validation trigger treats such an update as bookkeeping (no version bump, no
-- audit row), or lets it change what the code defines, only when it finds the mark of its own
-- transaction; only the owner can write a mark, unlike a session setting, which any caller can set.
CREATE UNLOGGED TABLE agentlab_sched.bookkeeping_marks (
    xact xid8 NOT NULL DEFAULT pg_current_xact_id(),
    schedule_id bigint NOT NULL,
    kind text NOT NULL,
    PRIMARY KEY (xact, schedule_id, kind),
    CONSTRAINT bookkeeping_marks_kind_check CHECK (kind IN ('countdown', 'rotate', 'code_sync'))
);

-- schedule_many()'s insert, validated already, is told to the write triggers by this session's value of
-- this sequence, set to the transaction's id while it inserts (sql/26_schedule_fields.sql,
-- in_bulk_insert()): only the owner may set it, and reading it is no query per row.
CREATE SEQUENCE agentlab_sched.bulk_insert_key AS bigint MINVALUE 0 START WITH 0;
REVOKE ALL ON SEQUENCE agentlab_sched.bulk_insert_key FROM PUBLIC;

-- The deployments whose code declared schedules, by fingerprint, with the first time a worker running
-- each synced: the newer deployment (seen first later) wins, an older one never overwrites it.
CREATE TABLE agentlab_sched.code_deployments (
    fingerprint text PRIMARY KEY,
    first_seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_seen_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The tasks of the app that declared them: a schedule of one of these that it no longer declares is
    -- gone.
    tasks text[] NOT NULL DEFAULT '{}',
    schedules text[] NOT NULL DEFAULT '{}'
);

-- ---------------------------------------------------------------------------------------------------
-- Runs and the fire ledger.

-- A run follows its Procrastinate job in every path (sql/50_runs.sql). Its link to its schedule has no
-- foreign key: finishing a job never waits on the schedules table (a migration's LOCK TABLE, DDL), and
-- PostgreSQL checks a foreign key again when a transaction updates a row it changed before (the batch
-- finish writes a run's result, then the job trigger its status), a check that takes the schedule's row.
-- Deleting a schedule still unlinks its runs (sql/50_runs.sql). A run and its fire name each other
-- without foreign keys (both tables are partitioned by time, and retention drops a period of both). Its
-- link to its Procrastinate job has none either: the job triggers keep it (a deleted job's runs are
-- unlinked by follow_deleted_job), and the key's checks cost reads in every change of a job.
CREATE TABLE agentlab_sched.runs (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    schedule_id bigint,
    fire_id bigint,
    task text NOT NULL,
    inputs jsonb NOT NULL DEFAULT '{}'::jsonb,
    status text NOT NULL DEFAULT 'queued',
    job_id bigint,
    segment integer NOT NULL DEFAULT 1,
    -- The error as written: a task's own words, or the system's in the writer's language. A system error
    -- also has its message as a term (error_term), rendered in the reader's language when read.
    error text,
    error_code text,
    result jsonb,
    state jsonb,
    session_key text,
    started_by text NOT NULL,
    timeout interval,
    deadline_at timestamptz,
    abort_reason text,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- When the run was last found suspended (its worker stopped heartbeating), and when it was asked to
    -- abort (a timeout or a cancel), so that a task still running long after the abort is reported so.
    suspended_at timestamptz,
    abort_requested_at timestamptz,
    cancelled_by text,
    -- What the task's body did in the job's current attempt, as the run middleware saw it just before
    -- Procrastinate finished the job: what the run becomes when the job is deleted instead of finished
    -- (procrastinate worker --delete-jobs).
    outcome text,
    -- The schedule's failure_epoch when this run's failure was counted: a run counts once, however many
    -- attempts fail, until a success resets the count.
    counted_epoch integer,
    -- A success or failure of the run not yet counted against its schedule, because the schedules table
    -- was locked when the job finished (finishing a job never waits on it); housekeeping counts it.
    tally_pending text,
    -- How many times on_interrupt=retry ran this run again.
    interrupts integer NOT NULL DEFAULT 0,
    -- Who last acted on it by hand (cancel_run, resume_run, abandon): the login role and the database
    -- clock, whatever name (cancelled_by) and time the caller gave.
    acted_by_login text,
    acted_at timestamptz,
    error_term jsonb,
    -- The run statuses of agentlab_sched/core/statuses.py (tests/contract/test_statuses.py checks it).
    CONSTRAINT runs_status_check CHECK (status IN (
        'queued', 'running', 'awaiting_approval', 'suspended',
        'succeeded', 'failed', 'cancelled', 'timed_out')),
    CONSTRAINT runs_segment_check CHECK (segment >= 1),
    CONSTRAINT runs_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'aborted')),
    PRIMARY KEY (id, created_at),
    CONSTRAINT runs_tally_pending_check CHECK (tally_pending IN ('success', 'failure'))
) PARTITION BY RANGE (created_at);
CREATE TABLE agentlab_sched_history.runs_default PARTITION OF agentlab_sched.runs DEFAULT;
-- The status lists of these partial indexes are literal (an index predicate is fixed when it is built);
-- tests/contract/test_statuses.py checks each against agentlab_sched/core/statuses.py. The queries say the
-- same with run_is_open() and the like, which PostgreSQL inlines, so the indexes serve them.
CREATE INDEX runs_schedule_idx ON agentlab_sched.runs (schedule_id, created_at DESC);
CREATE INDEX runs_job_idx ON agentlab_sched.runs (job_id);
-- The open runs of a schedule (overlap).
CREATE INDEX runs_open_idx ON agentlab_sched.runs (schedule_id)
    WHERE status IN ('queued', 'running', 'awaiting_approval', 'suspended');
-- Timeouts housekeeping enforces.
CREATE INDEX runs_deadline_idx ON agentlab_sched.runs (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('queued', 'running');
-- Suspended-run detection looks at running runs only.
CREATE INDEX runs_running_idx ON agentlab_sched.runs (job_id) WHERE status = 'running';
-- Retention walks finished runs oldest first.
CREATE INDEX runs_finished_idx ON agentlab_sched.runs (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled', 'timed_out');
CREATE INDEX runs_tally_pending_idx ON agentlab_sched.runs (schedule_id, finished_at) WHERE tally_pending IS NOT NULL;
-- The open runs of a schedule that wait for their first start (buffer_one keeps at most one).
CREATE INDEX runs_waiting_idx ON agentlab_sched.runs (schedule_id) WHERE status = 'queued' AND started_at IS NULL;
-- Runs newest first, a page at a time by keyset (list_runs: the dashboard, runs list).
CREATE INDEX runs_created_idx ON agentlab_sched.runs (created_at DESC, id DESC);

-- The fire ledger: one row per (schedule, due time, kind), whatever became of it.
CREATE TABLE agentlab_sched.fires (
    id bigint GENERATED ALWAYS AS IDENTITY,
    schedule_id bigint NOT NULL REFERENCES agentlab_sched.schedules (id) ON DELETE CASCADE,
    fire_at timestamptz NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    reason_code text,
    reason text,
    reason_params jsonb,
    inputs jsonb,
    run_id uuid,
    requested_by text,
    -- When the row was written, not when the tick's transaction began (lateness read from the ledger
    -- would be understated by the length of the batch).
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Which request a manual or backfill fire carried out.
    request_id bigint,
    PRIMARY KEY (id, fire_at),
    -- Once-only: the partition key fire_at is part of it, so it holds across partitions.
    CONSTRAINT fires_once UNIQUE (schedule_id, fire_at, kind),
    CONSTRAINT fires_kind_check CHECK (kind IN ('scheduled', 'misfire', 'manual', 'backfill')),
    -- The fire statuses of agentlab_sched/core/statuses.py (tests/contract/test_statuses.py checks it).
    CONSTRAINT fires_status_check CHECK (status IN (
        'started', 'skipped_overlap', 'skipped_misfire', 'failed_to_start'))
) PARTITION BY RANGE (fire_at);
CREATE TABLE agentlab_sched_history.fires_default PARTITION OF agentlab_sched.fires DEFAULT;
CREATE INDEX fires_created_idx ON agentlab_sched.fires (created_at DESC, id DESC);
CREATE INDEX fires_schedule_idx ON agentlab_sched.fires (schedule_id, fire_at DESC);
CREATE INDEX fires_run_idx ON agentlab_sched.fires (run_id);
-- The schedules whose fires were refused (doctor), without reading every schedule's latest fires.
CREATE INDEX fires_refused_idx ON agentlab_sched.fires (schedule_id, fire_at DESC) WHERE status = 'failed_to_start';

-- Manual and backfill fires asked for in SQL (trigger(), backfill()): a worker carries each out within a
-- tick through the same rules as every fire, and links the ledger row it wrote.
CREATE TABLE agentlab_sched.fire_requests (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id bigint NOT NULL REFERENCES agentlab_sched.schedules (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('manual', 'backfill')),
    -- manual: the instant asked for; backfill: the range [fire_at, until] whose due times are fired.
    fire_at timestamptz NOT NULL,
    until timestamptz,
    inputs jsonb CHECK (inputs IS NULL OR jsonb_typeof(inputs) = 'object'),
    requested_by text NOT NULL,
    -- The login role that asked (session_user when the request was made): its inputs are checked at
    -- launch with this role's privileges. NULL for requests older than the column.
    requested_login text DEFAULT session_user,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    fire_ids bigint[],
    -- Set when the request could not be carried out at all (e.g. a backfill range too large), in the
    -- deployment's locale; error_code and error_params say it as a message (rendered in any locale).
    error text,
    done_at timestamptz,
    -- backfill: the overlap policy its fires follow (buffer_all unless the request says otherwise).
    overlap text CHECK (overlap IS NULL OR overlap IN (
        'skip', 'buffer_one', 'buffer_all', 'allow_all', 'cancel_other')),
    -- manual: fire even though the schedule is paused (the caller said so).
    even_if_paused boolean NOT NULL DEFAULT false,
    error_code text,
    error_params jsonb,
    -- Fires written, by status: {"started": 3, "skipped_overlap": 1}.
    outcome jsonb,
    status text GENERATED ALWAYS AS (
        CASE WHEN done_at IS NULL THEN 'pending' WHEN error_code IS NOT NULL OR error IS NOT NULL THEN 'failed'
             ELSE 'done' END) STORED
);
CREATE INDEX fire_requests_pending_idx ON agentlab_sched.fire_requests (id) WHERE done_at IS NULL;
-- Every manual request has an instant of its own (trigger() moves a colliding one on by a microsecond).
CREATE UNIQUE INDEX fire_requests_manual_once ON agentlab_sched.fire_requests (schedule_id, fire_at)
    WHERE kind = 'manual';

CREATE TABLE agentlab_sched.approvals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- No foreign key (runs is partitioned): retention removes the approvals of the runs it drops.
    run_id uuid NOT NULL,
    segment integer NOT NULL,
    title text NOT NULL,
    state jsonb,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    -- The database role that decided (session_user); the name a caller gives is decided_label.
    decided_by text,
    decided_at timestamptz,
    comment text,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The Procrastinate job of the segment that asked for approval (no foreign key: Procrastinate may
    -- delete its jobs), so retention can remove every job of a run, not only its current one.
    job_id bigint,
    decided_label text,
    UNIQUE (run_id, segment)
);
CREATE INDEX approvals_pending_idx ON agentlab_sched.approvals (run_id) WHERE status = 'pending';

-- ---------------------------------------------------------------------------------------------------
-- Workers.

-- Tasks that live workers have registered (a fire for a task nobody runs is refused, not queued).
CREATE TABLE agentlab_sched.known_tasks (
    task text PRIMARY KEY,
    seen_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- What each worker runs, as it reports it: `agentlab-sched worker` every 10 s, a plain `procrastinate
-- worker` (through the run middleware) when it runs an agentlab-sched job. `doctor` reads it: which
-- workers are alive, which queues they take, whether they fire, their concurrency and their clock.
CREATE TABLE agentlab_sched.workers (
    name text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('agentlab-sched', 'procrastinate')),
    -- Procrastinate's id of this worker (procrastinate_workers.id) once known; no foreign key:
    -- Procrastinate deletes the rows of workers that stopped.
    procrastinate_worker_id bigint,
    host text NOT NULL,
    pid integer NOT NULL,
    app text,
    -- NULL: every queue.
    queues text[],
    concurrency integer,
    -- Runs the precise loop (fires on time) / the notification dispatcher.
    fires boolean NOT NULL DEFAULT false,
    notifies boolean NOT NULL DEFAULT false,
    -- The worker's clock minus the database's, in seconds, at its last report.
    clock_skew double precision,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_seen_idx ON agentlab_sched.workers (seen_at);

-- ---------------------------------------------------------------------------------------------------
-- Notifications.

-- The outbox: one row per (run, event, segment), written with the status change that causes it. No
-- foreign key to schedules: writing a run's notification must not wait on the schedules table (a job is
-- being finished; the check would take the schedule's row). Deleting a schedule still removes its
-- notifications (sql/60_notify.sql), and the dispatcher drops a row whose schedule is gone.
CREATE TABLE agentlab_sched.outbox (
    id bigint GENERATED ALWAYS AS IDENTITY,
    run_id uuid NOT NULL,
    schedule_id bigint,
    event text NOT NULL CHECK (event IN ('finished', 'failed', 'awaiting_approval', 'test')),
    segment integer NOT NULL DEFAULT 1,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'dropped')),
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    -- The partition key: the run's created_at (one value per run), so the once-only key holds.
    run_created_at timestamptz NOT NULL,
    PRIMARY KEY (id, run_created_at),
    CONSTRAINT outbox_once UNIQUE (run_id, event, segment, run_created_at)
) PARTITION BY RANGE (run_created_at);
CREATE TABLE agentlab_sched_history.outbox_default PARTITION OF agentlab_sched.outbox DEFAULT;
CREATE INDEX outbox_pending_idx ON agentlab_sched.outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_schedule_idx ON agentlab_sched.outbox (schedule_id);
-- The notifications given up on lately (doctor).
CREATE INDEX outbox_failed_idx ON agentlab_sched.outbox (created_at) WHERE status = 'failed';

-- Each attempt at delivering an outbox row.
CREATE TABLE agentlab_sched.deliveries (
    id bigint GENERATED ALWAYS AS IDENTITY,
    outbox_id bigint,
    attempted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    http_status integer,
    platform_code text,
    platform_text text,
    outcome text NOT NULL,
    detail text,
    PRIMARY KEY (id, attempted_at)
) PARTITION BY RANGE (attempted_at);
CREATE TABLE agentlab_sched_history.deliveries_default PARTITION OF agentlab_sched.deliveries DEFAULT;
CREATE INDEX deliveries_outbox_idx ON agentlab_sched.deliveries (outbox_id);

-- Per-bot send slots (rate limits that hold across workers).
CREATE TABLE agentlab_sched.bot_sends (
    bot text NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX bot_sends_idx ON agentlab_sched.bot_sends (bot, sent_at);

-- On Procrastinate's jobs table: taking a job looks up the waiting jobs of its lock (Procrastinate's own
-- lock index holds doing jobs only).
CREATE INDEX agentlab_sched_jobs_todo_lock_idx ON public.procrastinate_jobs (lock, priority, id)
    WHERE status = 'todo' AND lock IS NOT NULL;
