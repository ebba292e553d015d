-- Housekeeping: what a periodic task does every few seconds (agentlab_sched/runs/housekeeping.py).
--
-- - finished jobs of the scheduler's own periodic tasks (one a second) are deleted;
-- - runs whose worker stopped heartbeating for `stalled_after` become suspended (detect_suspended);
-- - runs past their deadline are aborted, and a task that ignores the abort is reported (enforce_timeouts,
--   time_out_run);
-- - runs' ends that could not be counted against their schedule when their job finished (the schedules
--   table or row was locked) are counted (apply_pending_tallies);
-- - the partitions of the history tables ahead are made (ensure_partitions, sql/72_partitions.sql);
-- - with a `retention` (or the database's), partitions past it are dropped (prune).
-- Every part skips rows another worker is handling; any number of workers can run it at once. The
-- windows default to agentlab_sched/limits.py's (policy_interval).

-- Runs whose job is `doing` on a worker that stopped heartbeating for `stalled_after` (Procrastinate's
-- stalled jobs), or whose job is gone: interrupted (interrupt_run: suspended with an error saying what to
-- do, or what the schedule's on_interrupt says). A run that was being aborted (timeout, cancel, a newer
-- fire) ends as that abort would have ended it. Returns how many runs moved.
CREATE OR REPLACE FUNCTION agentlab_sched.detect_suspended(now timestamptz DEFAULT now(),
                                                           stalled_after interval DEFAULT agentlab_sched.policy_interval('stall_seconds'))
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    r agentlab_sched.runs;
    n integer := 0;
BEGIN
    FOR c IN SELECT x.id, x.job_id FROM agentlab_sched.runs x
             LEFT JOIN public.procrastinate_jobs j ON j.id = x.job_id
             LEFT JOIN public.procrastinate_workers w ON w.id = j.worker_id
             WHERE x.status = 'running'
               AND (j.id IS NULL
                    OR (j.status = 'doing' AND (w.id IS NULL OR w.last_heartbeat < now - stalled_after)))
    LOOP
        -- The job's lock first, then the run's; skip whatever someone else is handling.
        IF c.job_id IS NOT NULL THEN
            PERFORM 1 FROM public.procrastinate_jobs j WHERE j.id = c.job_id AND j.status = 'doing' FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
        END IF;
        SELECT * INTO r FROM agentlab_sched.runs x
        WHERE x.id = c.id AND x.status = 'running' AND x.job_id IS NOT DISTINCT FROM c.job_id
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        IF r.job_id IS NOT NULL AND (r.abort_reason IS NOT NULL AND r.abort_reason <> 'shutdown'
                                     OR EXISTS (SELECT 1 FROM public.procrastinate_jobs j
                                                WHERE j.id = r.job_id AND j.abort_requested)) THEN
            PERFORM public.procrastinate_finish_job_v1(r.job_id, 'aborted', false);  -- the job trigger ends the run
        ELSE
            -- Its worker is gone: what its schedule's on_interrupt says (suspended by default).
            PERFORM agentlab_sched.interrupt_run(r, r.job_id IS NOT NULL, now);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- One run past its deadline: the first call asks Procrastinate to abort its job (abort_reason =
-- 'timeout'; the job trigger ends the run timed_out when the job ends aborted); a later call, once
-- `abort_grace` has passed and the task still runs (a synchronous task that does not check
-- context.should_abort()), says so in the run's error. Returns what it did: 'aborted', 'ignoring_abort'
-- or NULL.
CREATE OR REPLACE FUNCTION agentlab_sched.time_out_run(run_id uuid, now timestamptz DEFAULT now(),
                                                       abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'))
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r agentlab_sched.runs;
BEGIN
    r := agentlab_sched.lock_run(run_id);
    IF r.status <> 'running' OR r.deadline_at IS NULL OR r.deadline_at > now THEN
        RETURN NULL;
    END IF;
    IF r.abort_reason IS NULL THEN
        UPDATE agentlab_sched.runs x
        SET abort_reason = 'timeout', abort_requested_at = now, error_code = 'run.timed_out', updated_at = now
        WHERE x.id = r.id;
        IF r.job_id IS NOT NULL THEN
            PERFORM public.procrastinate_cancel_job_v1(r.job_id, true, false);
        END IF;
        RETURN 'aborted';
    END IF;
    IF r.abort_reason = 'timeout' AND r.abort_requested_at + abort_grace <= now
       AND r.error_code IS DISTINCT FROM 'run.ignoring_abort' THEN
        UPDATE agentlab_sched.runs x
        SET error = agentlab_sched.msg('run.ignoring_abort', jsonb_build_object(
                'timeout', jsonb_build_object('duration', extract(epoch FROM r.timeout)),
                'late', jsonb_build_object('duration', extract(epoch FROM now - r.abort_requested_at)))),
            error_code = 'run.ignoring_abort', updated_at = now,
            error_term = agentlab_sched.term('run.ignoring_abort', jsonb_build_object(
                'timeout', jsonb_build_object('duration', extract(epoch FROM r.timeout)),
                'late', jsonb_build_object('duration', extract(epoch FROM now - r.abort_requested_at))))
        WHERE x.id = r.id;
        RETURN 'ignoring_abort';
    END IF;
    RETURN NULL;
END
$$;

-- Every running run past its deadline: time_out_run() each. Returns how many changed.
CREATE OR REPLACE FUNCTION agentlab_sched.enforce_timeouts(now timestamptz DEFAULT now(),
                                                           abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'))
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rid uuid;
    n integer := 0;
BEGIN
    FOR rid IN SELECT x.id FROM agentlab_sched.runs x
               WHERE x.deadline_at <= now AND agentlab_sched.run_is_active(x.status)
               ORDER BY x.deadline_at LOOP
        IF agentlab_sched.time_out_run(rid, now, abort_grace) IS NOT NULL THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;

-- Remove history older than `older_than` (at least a minute) by whole partitions (sql/72_partitions.sql):
-- a partition of a history table whose period ended before now - older_than is detached and dropped,
-- unless it holds a run that has not ended, a fire whose run has not ended, or a notification still to
-- send; rows in a DEFAULT partition get a partition of their own first. With the runs go their approvals.
-- Procrastinate's finished jobs with no event since the cutoff go too (at most `batch` a call), and fire
-- requests carried out before it. Every partition is checked and counted (locked against writes, found
-- by index) before the first DETACH, whose lock on its table firing needs until the caller's transaction
-- ends; a DETACH waits at most 200 ms for its lock (firing waits behind it); a partition it could not
-- take is left for the next call. Returns the counts: rows of the dropped
-- partitions (fires, runs), jobs, requests and partitions.
CREATE OR REPLACE FUNCTION agentlab_sched.prune(older_than interval, now timestamptz DEFAULT now(),
                                                batch integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cutoff timestamptz;
    p record;
    lo timestamptz;
    n bigint;
    saved text := current_setting('lock_timeout');
    n_fires bigint := 0;
    n_runs bigint := 0;
    n_jobs integer := 0;
    n_requests integer;
    n_parts integer := 0;
    dropping jsonb := '[]';
    d record;
BEGIN
    IF older_than IS NULL OR older_than < interval '1 minute' THEN
        PERFORM agentlab_sched.fail('retention.too_short', 'older_than', jsonb_build_object(
            'field', jsonb_build_object('msg', 'run.field.older_than'),
            'seconds', extract(epoch FROM older_than)::bigint));
    END IF;
    cutoff := now - older_than;
    PERFORM agentlab_sched.ensure_partitions(now);

    -- First what takes no lock of the history tables. Procrastinate's finished jobs that nothing happened
    -- to since the cutoff (their events go with them; a run still kept loses its link to the job).
    DELETE FROM public.procrastinate_jobs j
    WHERE j.id IN (SELECT j2.id FROM public.procrastinate_jobs j2
                   WHERE j2.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
                     AND NOT EXISTS (SELECT 1 FROM public.procrastinate_events e
                                     WHERE e.job_id = j2.id AND e.at >= cutoff)
                   ORDER BY j2.id LIMIT batch);
    GET DIAGNOSTICS n_jobs = ROW_COUNT;

    DELETE FROM agentlab_sched.fire_requests q WHERE q.done_at < cutoff;
    GET DIAGNOSTICS n_requests = ROW_COUNT;

    -- Last, the partitions, in two passes. A DETACH holds its parent's lock (which firing needs) until
    -- the caller's transaction ends, so everything slow comes before the first one: each partition past
    -- the cutoff is locked against writes (SHARE: a backfill into its period waits; firing, which writes
    -- today's partitions, does not), so what is checked and counted is what is dropped; live work keeps
    -- its partition (open runs are few: runs_open_idx, which run_is_open() matches).
    FOR p IN SELECT * FROM agentlab_sched.history_partitions() x
             WHERE NOT x.is_default AND x.upper_bound <= cutoff ORDER BY x.upper_bound, x.parent LOOP
        lo := coalesce(p.lower_bound, '-infinity');
        BEGIN
            PERFORM set_config('lock_timeout', '200ms', true);
            EXECUTE format('LOCK TABLE agentlab_sched_history.%I IN SHARE MODE', p.part);
            PERFORM set_config('lock_timeout', saved, true);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', saved, true);
            CONTINUE;  -- someone writes there now: next round
        END;
        CONTINUE WHEN p.parent = 'runs' AND EXISTS (
            SELECT 1 FROM agentlab_sched.runs r
            WHERE agentlab_sched.run_is_open(r.status) AND r.created_at >= lo AND r.created_at < p.upper_bound);
        CONTINUE WHEN p.parent = 'fires' AND EXISTS (
            SELECT 1 FROM agentlab_sched.runs r
            WHERE agentlab_sched.run_is_open(r.status)
              AND EXISTS (SELECT 1 FROM agentlab_sched.fires f
                          WHERE f.run_id = r.id AND f.fire_at >= lo AND f.fire_at < p.upper_bound));
        CONTINUE WHEN p.parent = 'outbox' AND EXISTS (
            SELECT 1 FROM agentlab_sched.outbox o
            WHERE o.status = 'pending' AND o.run_created_at >= lo AND o.run_created_at < p.upper_bound);
        EXECUTE format('SELECT count(*) FROM agentlab_sched_history.%I', p.part) INTO n;
        dropping := dropping || jsonb_build_object('parent', p.parent, 'part', p.part, 'rows', n);
    END LOOP;

    FOR d IN SELECT * FROM jsonb_to_recordset(dropping) AS x(parent text, part text, rows bigint) LOOP
        BEGIN
            -- Firing waits behind a DETACH waiting for its lock: wait little, and try again next round.
            PERFORM set_config('lock_timeout', '200ms', true);
            IF d.parent = 'runs' THEN
                -- Few runs have approvals: each one's run is looked up in the partition by key.
                EXECUTE format('DELETE FROM agentlab_sched.approvals a WHERE EXISTS '
                               '(SELECT 1 FROM agentlab_sched_history.%I r WHERE r.id = a.run_id)', d.part);
            END IF;
            EXECUTE format('ALTER TABLE agentlab_sched.%I DETACH PARTITION agentlab_sched_history.%I', d.parent, d.part);
            EXECUTE format('DROP TABLE agentlab_sched_history.%I', d.part);
            PERFORM set_config('lock_timeout', saved, true);
            IF d.parent = 'runs' THEN
                n_runs := n_runs + d.rows;
            ELSIF d.parent = 'fires' THEN
                n_fires := n_fires + d.rows;
            END IF;
            n_parts := n_parts + 1;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM set_config('lock_timeout', saved, true);
        END;
    END LOOP;

    RETURN jsonb_build_object('fires', n_fires, 'runs', n_runs, 'jobs', n_jobs, 'requests', n_requests,
                              'partitions', n_parts);
END
$$;

DROP FUNCTION IF EXISTS agentlab_sched.housekeeping(timestamptz, interval, interval, interval, integer);
-- One round: the parts above, then (when `prune_due`) the partitions ahead and, with a `retention` (or
-- the database's, set_retention()), prune().
CREATE OR REPLACE FUNCTION agentlab_sched.housekeeping(now timestamptz DEFAULT now(),
                                                       stalled_after interval DEFAULT agentlab_sched.policy_interval('stall_seconds'),
                                                       retention interval DEFAULT NULL,
                                                       abort_grace interval DEFAULT agentlab_sched.policy_interval('abort_grace_seconds'),
                                                       prune_batch integer DEFAULT 1000,
                                                       prune_due boolean DEFAULT true)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pruned integer;
    done jsonb;
BEGIN
    -- The scheduler's own periodic jobs are worth nothing once finished.
    DELETE FROM public.procrastinate_jobs j
    WHERE j.task_name IN ('agentlab_sched:tick', 'agentlab_sched:housekeeping')
      AND j.status IN ('succeeded', 'failed', 'cancelled', 'aborted')
      AND j.id < (SELECT max(id) - 100 FROM public.procrastinate_jobs);
    GET DIAGNOSTICS pruned = ROW_COUNT;
    done := jsonb_build_object(
        'pruned_ticks', pruned,
        'suspended', agentlab_sched.detect_suspended(now, stalled_after),
        'timeouts', agentlab_sched.enforce_timeouts(now, abort_grace),
        'tallied', agentlab_sched.apply_pending_tallies());
    IF prune_due THEN
        done := done || jsonb_build_object('partitions', agentlab_sched.ensure_partitions(now));
        retention := coalesce(retention, agentlab_sched.retention());
        IF retention IS NOT NULL THEN
            done := done || jsonb_build_object('pruned', agentlab_sched.prune(retention, now, prune_batch));
        END IF;
    END IF;
    RETURN done;
END
$$;
