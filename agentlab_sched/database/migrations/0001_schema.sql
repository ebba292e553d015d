-- agentlab-sched base schema: tables, constraints and indexes.
-- Functions, triggers and views live in sql/ and are re-applied by every migrate.

CREATE SCHEMA IF NOT EXISTS agentlab_sched;

-- The message catalogue (copied from agentlab_sched/messages at every migrate), so that SQL renders the
-- same words as Python.
CREATE TABLE agentlab_sched.messages (
    code text NOT NULL,
    locale text NOT NULL,
    template text NOT NULL,
    PRIMARY KEY (code, locale)
);

-- Deployment settings the database needs without an environment (locale, windows).
CREATE TABLE agentlab_sched.config (
    key text PRIMARY KEY,
    value text NOT NULL
);

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
    CONSTRAINT schedules_window_check CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at),
    CONSTRAINT schedules_webhook_format_check CHECK (
        webhook_format IS NULL OR webhook_format IN ('generic', 'feishu', 'wecom', 'dingtalk')),
    CONSTRAINT schedules_webhook_events_check CHECK (
        webhook_events <@ ARRAY['finished', 'failed', 'awaiting_approval']),
    CONSTRAINT schedules_webhook_ciphertext_check CHECK (
        (webhook_url_enc IS NULL OR webhook_url_enc LIKE 'gAAAAA%')
        AND (webhook_secret_enc IS NULL OR webhook_secret_enc LIKE 'gAAAAA%'))
);

-- The tick reads only what is due (and what a worker must plan): both partial, both tiny when idle.
CREATE INDEX schedules_due_idx ON agentlab_sched.schedules (next_run_at) WHERE enabled;
CREATE INDEX schedules_replan_idx ON agentlab_sched.schedules (id) WHERE replan IS NOT NULL;

CREATE TABLE agentlab_sched.schedule_changes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id bigint NOT NULL,
    schedule_name text NOT NULL,
    operation text NOT NULL CHECK (operation IN ('insert', 'update', 'delete')),
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    db_role text NOT NULL DEFAULT current_user,
    application_name text,
    old_values jsonb,
    new_values jsonb
);
CREATE INDEX schedule_changes_schedule_idx ON agentlab_sched.schedule_changes (schedule_id, id);

CREATE TABLE agentlab_sched.runs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    schedule_id bigint REFERENCES agentlab_sched.schedules (id) ON DELETE SET NULL,
    fire_id bigint,
    task text NOT NULL,
    inputs jsonb NOT NULL DEFAULT '{}'::jsonb,
    status text NOT NULL DEFAULT 'queued',
    job_id bigint REFERENCES public.procrastinate_jobs (id) ON DELETE SET NULL,
    segment integer NOT NULL DEFAULT 1,
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
    CONSTRAINT runs_status_check CHECK (status IN (
        'queued', 'running', 'awaiting_approval', 'suspended',
        'succeeded', 'failed', 'cancelled', 'timed_out')),
    CONSTRAINT runs_segment_check CHECK (segment >= 1)
);
CREATE INDEX runs_schedule_idx ON agentlab_sched.runs (schedule_id, created_at DESC);
CREATE INDEX runs_job_idx ON agentlab_sched.runs (job_id);
CREATE INDEX runs_open_idx ON agentlab_sched.runs (schedule_id)
    WHERE status IN ('queued', 'running', 'awaiting_approval', 'suspended');
CREATE INDEX runs_deadline_idx ON agentlab_sched.runs (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('queued', 'running');

CREATE TABLE agentlab_sched.fires (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id bigint NOT NULL REFERENCES agentlab_sched.schedules (id) ON DELETE CASCADE,
    fire_at timestamptz NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    reason_code text,
    reason text,
    reason_params jsonb,
    inputs jsonb,
    -- Deferred: a fire and its run are written in one transaction, each naming the other.
    run_id uuid REFERENCES agentlab_sched.runs (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED,
    requested_by text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fires_once UNIQUE (schedule_id, fire_at, kind),
    CONSTRAINT fires_kind_check CHECK (kind IN ('scheduled', 'misfire', 'manual', 'backfill')),
    CONSTRAINT fires_status_check CHECK (status IN (
        'started', 'skipped_overlap', 'skipped_misfire', 'failed_to_start'))
);
CREATE INDEX fires_created_idx ON agentlab_sched.fires (created_at DESC, id DESC);
CREATE INDEX fires_schedule_idx ON agentlab_sched.fires (schedule_id, fire_at DESC);

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
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    fire_ids bigint[],
    -- Set when the request could not be carried out at all (e.g. a backfill range too large).
    error text,
    done_at timestamptz
);
CREATE INDEX fire_requests_pending_idx ON agentlab_sched.fire_requests (id) WHERE done_at IS NULL;
CREATE INDEX fires_run_idx ON agentlab_sched.fires (run_id);

ALTER TABLE agentlab_sched.runs
    ADD CONSTRAINT runs_fire_fk FOREIGN KEY (fire_id) REFERENCES agentlab_sched.fires (id) ON DELETE SET NULL
    DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE agentlab_sched.approvals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id uuid NOT NULL REFERENCES agentlab_sched.runs (id) ON DELETE CASCADE,
    segment integer NOT NULL,
    title text NOT NULL,
    state jsonb,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    decided_by text,
    decided_at timestamptz,
    comment text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, segment)
);

-- Tasks that live workers have registered (a fire for a task nobody runs is refused, not queued).
CREATE TABLE agentlab_sched.known_tasks (
    task text PRIMARY KEY,
    seen_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Notification outbox: one row per (run, event, segment), written with the status change that causes it.
CREATE TABLE agentlab_sched.outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id uuid NOT NULL REFERENCES agentlab_sched.runs (id) ON DELETE CASCADE,
    schedule_id bigint REFERENCES agentlab_sched.schedules (id) ON DELETE CASCADE,
    event text NOT NULL CHECK (event IN ('finished', 'failed', 'awaiting_approval', 'test')),
    segment integer NOT NULL DEFAULT 1,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'dropped')),
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    CONSTRAINT outbox_once UNIQUE (run_id, event, segment)
);
CREATE INDEX outbox_pending_idx ON agentlab_sched.outbox (next_attempt_at) WHERE status = 'pending';

CREATE TABLE agentlab_sched.deliveries (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id bigint REFERENCES agentlab_sched.outbox (id) ON DELETE CASCADE,
    attempted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    http_status integer,
    platform_code text,
    platform_text text,
    outcome text NOT NULL,
    detail text
);
CREATE INDEX deliveries_outbox_idx ON agentlab_sched.deliveries (outbox_id);

-- Per-bot send slots (rate limits that hold across workers).
CREATE TABLE agentlab_sched.bot_sends (
    bot text NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX bot_sends_idx ON agentlab_sched.bot_sends (bot, sent_at);
