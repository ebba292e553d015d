-- Parts of the facts that need more than the reader's rights, each NULL when the caller lacks them
-- (checked before the statement is planned, so a reader or an admin gets the rest of the facts).
CREATE OR REPLACE FUNCTION agentlab_sched.doctor_webhooks() RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT (has_column_privilege('agentlab_sched.schedules', 'webhook_url_enc', 'SELECT')
            AND has_column_privilege('agentlab_sched.schedules', 'webhook_secret_enc', 'SELECT')) THEN
        RETURN NULL;
    END IF;
    RETURN coalesce((
        SELECT jsonb_agg(jsonb_build_object('id', s.id, 'name', s.name, 'url', s.webhook_url_enc,
                                            'secret', s.webhook_secret_enc) ORDER BY s.name)
        FROM agentlab_sched.schedules s WHERE s.webhook_url_enc IS NOT NULL), '[]'::jsonb);
END
$$;

-- Rows in a DEFAULT partition of a history table (default_partition_rows()), NULL for a caller that may
-- not call it (the reader).
CREATE OR REPLACE FUNCTION agentlab_sched.doctor_default_partitions() RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT has_function_privilege('agentlab_sched.default_partition_rows()', 'EXECUTE') THEN
        RETURN NULL;
    END IF;
    RETURN agentlab_sched.default_partition_rows();
END
$$;

-- The scheduler's own jobs (the tick, housekeeping) waiting for more than a minute at `at_time`: no live
-- worker takes their queue. NULL when the caller may not read Procrastinate's events.
CREATE OR REPLACE FUNCTION agentlab_sched.doctor_waiting_jobs(at_time timestamptz) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT (has_table_privilege('public.procrastinate_events', 'SELECT')
            AND has_table_privilege('public.procrastinate_jobs', 'SELECT')) THEN
        RETURN NULL;
    END IF;
    RETURN coalesce((
        SELECT jsonb_agg(jsonb_build_object('queue', j.queue_name, 'task', j.task_name,
                                            'waiting_seconds', extract(epoch FROM at_time - e.at)))
        FROM public.procrastinate_jobs j
        JOIN LATERAL (SELECT min(ev.at) AS at FROM public.procrastinate_events ev
                      WHERE ev.job_id = j.id AND ev.type = 'deferred') e ON true
        WHERE j.status = 'todo' AND j.task_name LIKE 'agentlab_sched:%'
          AND (j.scheduled_at IS NULL OR j.scheduled_at <= at_time)
          AND e.at < at_time - interval '1 minute'), '[]'::jsonb);
END
$$;

-- What `agentlab-sched doctor` looks at, in one call: the facts, as JSON; Python judges them
-- (agentlab_sched/observe/health.py) and says what needs a person.
--
-- `stall`: a worker whose heartbeat is older is not alive (Procrastinate's stalled-worker window);
-- `recent`: how far back failures count (failed fire requests, notifications given up on).
CREATE OR REPLACE FUNCTION agentlab_sched.doctor_facts(stall interval DEFAULT agentlab_sched.policy_interval('stall_seconds'),
                                                       recent interval DEFAULT interval '1 day')
RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- Its plan's cost estimate passes jit_above_cost at a million schedules (the recursive task scan below is
-- costed as if it read the table many times over): compiling it took 0.6-0.7 s, longer than running it.
SET jit = off
AS $$
    WITH t AS (SELECT clock_timestamp() AS now)
    SELECT jsonb_build_object(
        'now', t.now,
        'server_version', current_setting('server_version'),
        'migrations', (SELECT coalesce(jsonb_agg(m.name ORDER BY m.name), '[]'::jsonb)
                       FROM agentlab_sched.schema_migrations m),
        'fingerprint', (SELECT c.value FROM agentlab_sched.config c WHERE c.key = 'schema_fingerprint'),
        -- Live workers as Procrastinate counts them (any worker: ours or a plain `procrastinate worker`).
        'procrastinate_workers', (SELECT count(*) FROM public.procrastinate_workers p WHERE p.last_heartbeat > t.now - stall),
        -- What workers reported of themselves; `alive` by their own report (ours) or Procrastinate's heartbeat.
        'workers', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'name', w.name, 'kind', w.kind, 'host', w.host, 'pid', w.pid, 'app', w.app, 'queues', w.queues,
                'concurrency', w.concurrency, 'fires', w.fires, 'notifies', w.notifies,
                'clock_skew', w.clock_skew, 'seen_at', w.seen_at,
                'alive', CASE WHEN w.kind = 'agentlab-sched' THEN w.seen_at > t.now - stall
                              ELSE EXISTS (SELECT 1 FROM public.procrastinate_workers p
                                           WHERE p.id = w.procrastinate_worker_id AND p.last_heartbeat > t.now - stall)
                         END) ORDER BY w.name)
            FROM agentlab_sched.workers w), '[]'::jsonb),
        -- The queue the tick runs on, as its latest job says (AGENTLAB_SCHED_SCHEDULER_QUEUE of the workers).
        'tick_queue', (SELECT j.queue_name FROM public.procrastinate_jobs j WHERE j.task_name = 'agentlab_sched:tick'
                       ORDER BY j.id DESC LIMIT 1),
        'schedules', (SELECT count(*) FROM agentlab_sched.schedules),
        'enabled', (SELECT count(*) FROM agentlab_sched.schedules WHERE enabled),
        'paused', (SELECT count(*) FROM agentlab_sched.schedules
                   WHERE NOT enabled AND NOT (pause_after_failures IS NOT NULL
                                             AND consecutive_failures >= pause_after_failures)),
        'overdue', coalesce((
            SELECT jsonb_agg(jsonb_build_object('name', o.name, 'problem', o.problem, 'timezone', o.timezone,
                                                'next_run_at', o.next_run_at,
                                                'late_seconds', extract(epoch FROM o.late_by)) ORDER BY o.late_by DESC)
            FROM agentlab_sched.overdue o), '[]'::jsonb),
        -- Enabled, yet nothing is pending and nothing to plan: stopped (its cron no longer parses), unless it
        -- simply ended (ends_at past, no runs left).
        'stopped', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'name', s.name, 'reason_code', lf.reason_code,
                'reason', agentlab_sched.reason_text(lf.reason_code, lf.reason_params, lf.reason)) ORDER BY s.name)
            FROM agentlab_sched.schedules s
            LEFT JOIN LATERAL (SELECT f.reason_code, f.reason_params, f.reason FROM agentlab_sched.fires f
                               WHERE f.schedule_id = s.id ORDER BY f.fire_at DESC, f.id DESC LIMIT 1) lf ON true
            WHERE s.enabled AND s.next_run_at IS NULL AND s.replan IS NULL
              AND NOT coalesce(s.ends_at <= t.now, false) AND s.remaining_runs IS DISTINCT FROM 0), '[]'::jsonb),
        'paused_after_failures', coalesce((
            SELECT jsonb_agg(jsonb_build_object('name', s.name, 'failures', s.consecutive_failures,
                                                'paused_at', s.paused_at, 'timezone', s.timezone) ORDER BY s.name)
            FROM agentlab_sched.schedules s
            WHERE NOT s.enabled AND s.pause_after_failures IS NOT NULL
              AND s.consecutive_failures >= s.pause_after_failures), '[]'::jsonb),
        -- Enabled schedules whose last 3 runs or more failed in a row, with the latest failure's error.
        'failing', coalesce((
            SELECT jsonb_agg(jsonb_build_object('name', s.name, 'failures', s.consecutive_failures,
                                                'status', lr.status, 'error_code', lr.error_code,
                                                'error', agentlab_sched.run_error_text(lr.error, lr.error_term),
                                                'at', lr.finished_at) ORDER BY s.name)
            FROM agentlab_sched.schedules s
            LEFT JOIN LATERAL (SELECT r.status, r.error_code, r.error, r.error_term, r.finished_at FROM agentlab_sched.runs r
                               WHERE r.schedule_id = s.id AND agentlab_sched.run_is_failure(r.status)
                               ORDER BY r.created_at DESC LIMIT 1) lr ON true
            WHERE s.enabled AND s.consecutive_failures >= 3), '[]'::jsonb),
        -- Enabled schedules whose last 3 fires were all refused (failed_to_start: the task is not registered,
        -- the inputs do not resolve...), with the latest reason: nothing of theirs runs.
        'refused_fires', coalesce((
            SELECT jsonb_agg(jsonb_build_object('name', s.name, 'reason_code', lf.reason_code,
                                                'reason', agentlab_sched.reason_text(lf.reason_code, lf.reason_params,
                                                                                     lf.reason),
                                                'at', lf.fire_at) ORDER BY s.name)
            -- Only schedules with a refused fire at all (fires_refused_idx: a million schedules are not
            -- each looked up in every partition of the ledger).
            FROM (SELECT DISTINCT rf.schedule_id FROM agentlab_sched.fires rf WHERE rf.status = 'failed_to_start') c
            JOIN agentlab_sched.schedules s ON s.id = c.schedule_id
            JOIN LATERAL (SELECT count(*) FILTER (WHERE f.status = 'failed_to_start') AS refused, count(*) AS fires,
                                 (array_agg(f.reason_code ORDER BY f.fire_at DESC, f.id DESC))[1] AS reason_code,
                                 (array_agg(f.reason_params ORDER BY f.fire_at DESC, f.id DESC))[1] AS reason_params,
                                 (array_agg(f.reason ORDER BY f.fire_at DESC, f.id DESC))[1] AS reason,
                                 max(f.fire_at) AS fire_at
                          FROM (SELECT * FROM agentlab_sched.fires f WHERE f.schedule_id = s.id
                                ORDER BY f.fire_at DESC, f.id DESC LIMIT 3) f) lf ON true
            WHERE s.enabled AND lf.fires = 3 AND lf.refused = 3), '[]'::jsonb),
        'unregistered_tasks', coalesce((
            -- Each task's first names (as many as a finding shows: limit.names_shown) and how many there
            -- are: a million schedules of an unregistered task are not listed (that took 87 s).
            SELECT jsonb_agg(jsonb_build_object('task', u.task, 'schedules', u.names, 'count', u.count) ORDER BY u.task)
            FROM (SELECT t.task,
                         (SELECT coalesce(jsonb_agg(f.name ORDER BY f.name), '[]'::jsonb)
                          FROM (SELECT s.name FROM agentlab_sched.schedules s WHERE s.enabled AND s.task = t.task
                                ORDER BY s.name LIMIT agentlab_sched.size_limit('names_shown')) f) AS names,
                         (SELECT count(*) FROM agentlab_sched.schedules s WHERE s.enabled AND s.task = t.task) AS count
                  -- Each distinct task of the enabled schedules, read from schedules_task_idx one task at a
                  -- time (a million schedules are neither read nor sorted), and looked up once.
                  FROM (WITH RECURSIVE d AS (
                            (SELECT e.task FROM agentlab_sched.schedules e WHERE e.enabled ORDER BY e.task LIMIT 1)
                            UNION ALL
                            SELECT (SELECT e.task FROM agentlab_sched.schedules e
                                    WHERE e.enabled AND e.task > d.task ORDER BY e.task LIMIT 1)
                            FROM d WHERE d.task IS NOT NULL)
                        SELECT d.task FROM d WHERE d.task IS NOT NULL) t
                  WHERE NOT agentlab_sched.task_registered(t.task)) u), '[]'::jsonb),
        -- Rows in a DEFAULT partition of a history table (NULL when the caller may not look).
        'default_partition_rows', agentlab_sched.doctor_default_partitions(),
        'suspended_runs', coalesce((
            SELECT jsonb_agg(jsonb_build_object('run', left(r.id::text, 6), 'run_id', r.id, 'schedule', s.name,
                                                'since', coalesce(r.suspended_at, r.updated_at)) ORDER BY r.created_at)
            FROM agentlab_sched.runs r LEFT JOIN agentlab_sched.schedules s ON s.id = r.schedule_id
            WHERE r.status = 'suspended'), '[]'::jsonb),
        'failed_requests', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'id', q.id, 'schedule', s.name, 'kind', q.kind, 'error_code', q.error_code,
                'error', agentlab_sched.reason_text(q.error_code, q.error_params, q.error),
                'requested_at', q.requested_at) ORDER BY q.id)
            FROM agentlab_sched.fire_requests q JOIN agentlab_sched.schedules s ON s.id = q.schedule_id
            WHERE (q.error IS NOT NULL OR q.error_code IS NOT NULL) AND q.requested_at > t.now - recent),
            '[]'::jsonb),
        'waiting_requests', coalesce((
            SELECT jsonb_agg(jsonb_build_object('id', q.id, 'schedule', s.name, 'kind', q.kind,
                                                'waiting_seconds', extract(epoch FROM t.now - q.requested_at))
                             ORDER BY q.id)
            FROM agentlab_sched.fire_requests q JOIN agentlab_sched.schedules s ON s.id = q.schedule_id
            WHERE q.done_at IS NULL AND q.requested_at < t.now - interval '1 minute'), '[]'::jsonb),
        -- The pending notifications by outbox_pending_idx, the failed ones by outbox_failed_idx: the outbox
        -- holds every notification of the retention, sent ones too.
        'outbox', (SELECT jsonb_build_object(
                       'pending', p.pending,
                       'retrying', p.retrying,
                       'oldest_seconds', extract(epoch FROM t.now - p.oldest),
                       'failed', (SELECT count(*) FROM agentlab_sched.outbox o
                                  WHERE o.status = 'failed' AND o.created_at > t.now - recent))
                   FROM (SELECT count(*) AS pending, count(*) FILTER (WHERE o.attempts > 0) AS retrying,
                                min(o.created_at) AS oldest
                         FROM agentlab_sched.outbox o WHERE o.status = 'pending') p),
        'failing_notifications', coalesce((
            SELECT jsonb_agg(jsonb_build_object('schedule', s.name, 'status', o.status, 'attempts', o.attempts,
                                                'error', o.last_error, 'event', o.event) ORDER BY o.id DESC)
            FROM (SELECT * FROM ((SELECT * FROM agentlab_sched.outbox o
                                  WHERE o.status = 'pending' AND o.attempts > 0 ORDER BY o.id DESC LIMIT 20)
                                 UNION ALL
                                 (SELECT * FROM agentlab_sched.outbox o
                                  WHERE o.status = 'failed' AND o.created_at > t.now - recent
                                  ORDER BY o.id DESC LIMIT 20)) b
                  ORDER BY b.id DESC LIMIT 20) o
            LEFT JOIN agentlab_sched.schedules s ON s.id = o.schedule_id), '[]'::jsonb),
        -- NULL when the caller may not read the ciphertext (the reader): doctor says it could not check.
        'webhooks', agentlab_sched.doctor_webhooks(),
        -- The scheduler's own jobs (the tick, housekeeping) waiting for more than a minute: no live worker
        -- takes their queue.
        'waiting_jobs', agentlab_sched.doctor_waiting_jobs(t.now)
    )
    FROM t
$$;
