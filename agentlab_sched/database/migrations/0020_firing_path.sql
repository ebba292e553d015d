-- Fire requests (trigger(), backfill()): each its own fire or its own error, a backfill's own overlap
-- policy, a refusal kept as a message code with its parameters, and what the request launched.

ALTER TABLE agentlab_sched.fire_requests
    -- backfill: the overlap policy its fires follow (buffer_all unless the request says otherwise).
    ADD COLUMN overlap text CHECK (overlap IS NULL OR overlap IN (
        'skip', 'buffer_one', 'buffer_all', 'allow_all', 'cancel_other')),
    -- manual: fire even though the schedule is paused (the caller said so).
    ADD COLUMN even_if_paused boolean NOT NULL DEFAULT false,
    -- Why the request failed, as a message code and its parameters (rendered in any locale); `error` keeps
    -- the words in the deployment's locale.
    ADD COLUMN error_code text,
    ADD COLUMN error_params jsonb,
    -- Fires written, by status: {"started": 3, "skipped_overlap": 1}.
    ADD COLUMN outcome jsonb,
    ADD COLUMN status text GENERATED ALWAYS AS (
        CASE WHEN done_at IS NULL THEN 'pending' WHEN error_code IS NOT NULL OR error IS NOT NULL THEN 'failed'
             ELSE 'done' END) STORED;

-- Manual requests made in the same millisecond used to share an instant, so all but one found their fire
-- "already recorded". Spread the old ones a microsecond apart, then keep every manual request at an
-- instant of its own (trigger() moves a colliding one on by a microsecond).
UPDATE agentlab_sched.fire_requests r
SET fire_at = r.fire_at + d.n * interval '1 microsecond'
FROM (SELECT id, row_number() OVER (PARTITION BY schedule_id, fire_at ORDER BY id) - 1 AS n
      FROM agentlab_sched.fire_requests WHERE kind = 'manual') d
WHERE r.id = d.id AND d.n > 0;
CREATE UNIQUE INDEX fire_requests_manual_once ON agentlab_sched.fire_requests (schedule_id, fire_at)
    WHERE kind = 'manual';

-- Which request a manual or backfill fire carried out.
ALTER TABLE agentlab_sched.fires ADD COLUMN request_id bigint;

-- A ledger row's created_at is when it was written, not when the tick's transaction began (lateness
-- read from the ledger would be understated by the length of the batch).
ALTER TABLE agentlab_sched.fires ALTER COLUMN created_at SET DEFAULT clock_timestamp();

-- The moment a re-plan was asked for (created, resumed, cron or time zone changed): the next fire is
-- planned after it, not after the tick that happens to plan it.
-- (NULL for re-plans asked for before this column: planned after the tick's now, as they were.)
ALTER TABLE agentlab_sched.schedules ADD COLUMN replan_at timestamptz;

-- A worker running the resolvers of a schedule's fires (outside any transaction) leases it until then, so
-- other workers do not claim it meanwhile; the lease ends when the fire is applied, or by itself.
ALTER TABLE agentlab_sched.schedules ADD COLUMN resolving_until timestamptz;
