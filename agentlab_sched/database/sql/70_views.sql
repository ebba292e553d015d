-- Views for people and scripts: schedule_status, fire_history, overdue. Reference: docs/sql.md.
-- Re-applied by every migrate with CREATE OR REPLACE VIEW, which can only append columns: renaming or
-- removing one needs a migration that drops the view first.

-- The on-time window in seconds (config key on_time_window_seconds, 60 by default).
CREATE OR REPLACE FUNCTION agentlab_sched.on_time_window() RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT make_interval(secs => coalesce(
        (SELECT value::double precision FROM agentlab_sched.config
         WHERE key = 'on_time_window_seconds' AND value ~ '^\s*[0-9]+(\.[0-9]+)?\s*$'),
        60))
$$;

-- A ledger reason in the reader's language (the session's agentlab_sched.locale): rendered at read time
-- from its code and parameters, so one ledger written by workers in different locales reads in one
-- language. The text recorded with the row is used when there is no code the catalogue knows (a
-- resolver's refusal without parameters, rows from older versions).
CREATE OR REPLACE FUNCTION agentlab_sched.reason_text(code text, params jsonb, recorded text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN code IS NULL THEN recorded
        WHEN code = 'launch.refused' AND NOT coalesce(params ? 'reason', false) THEN recorded
        WHEN EXISTS (SELECT 1 FROM agentlab_sched.messages m WHERE m.code = reason_text.code)
            THEN agentlab_sched.msg(code, coalesce(params, '{}'::jsonb))
        ELSE recorded
    END
$$;

-- One row per schedule: what it is, when it fires next, how its last fire and run went. Webhook URL and
-- secret are never shown: only the format, a hint of the URL (its host) and whether a secret is set.
CREATE OR REPLACE VIEW agentlab_sched.schedule_status AS
SELECT
    s.id,
    s.name,
    s.cron,
    s.timezone,
    s.task,
    s.enabled,
    s.next_run_at,
    s.replan,
    lf.id AS last_fire_id,
    lf.fire_at AS last_fire_at,
    lf.kind AS last_fire_kind,
    lf.status AS last_fire_status,
    lf.reason_code AS last_fire_reason_code,
    agentlab_sched.reason_text(lf.reason_code, lf.reason_params, lf.reason) AS last_fire_reason,
    lr.id AS last_run_id,
    lr.status AS last_run_status,
    lr.created_at AS last_run_created_at,
    lr.finished_at AS last_run_finished_at,
    s.consecutive_failures,
    s.pause_after_failures,
    agentlab_sched.paused_reason_text(s.paused_reason, s.paused_reason_code, s.paused_reason_params) AS paused_reason,
    s.paused_at,
    s.overlap,
    s.remaining_runs,
    s.version,
    s.updated_at,
    s.webhook_format,
    s.webhook_url_hint,
    s.webhook_secret_enc IS NOT NULL AS webhook_has_secret,
    CASE WHEN s.webhook_url_enc IS NOT NULL THEN s.webhook_events END AS webhook_events,
    CASE WHEN s.webhook_url_enc IS NOT NULL THEN
        coalesce(s.webhook_format, 'generic') || ' ' || coalesce(s.webhook_url_hint, '***')
    END AS webhook
FROM agentlab_sched.schedules s
LEFT JOIN LATERAL (
    SELECT f.id, f.fire_at, f.kind, f.status, f.reason_code, f.reason_params, f.reason
    FROM agentlab_sched.fires f
    WHERE f.schedule_id = s.id
    ORDER BY f.fire_at DESC, f.id DESC
    LIMIT 1
) lf ON true
LEFT JOIN LATERAL (
    SELECT r.id, r.status, r.created_at, r.finished_at
    FROM agentlab_sched.runs r
    WHERE r.schedule_id = s.id
    ORDER BY r.created_at DESC, r.id DESC
    LIMIT 1
) lr ON true;

-- The ledger, newest first, with the outcome of each fire's run.
CREATE OR REPLACE VIEW agentlab_sched.fire_history AS
SELECT
    f.id AS fire_id,
    f.schedule_id,
    s.name AS schedule_name,
    f.fire_at,
    f.kind,
    f.status,
    f.reason_code,
    agentlab_sched.reason_text(f.reason_code, f.reason_params, f.reason) AS reason,
    f.run_id,
    r.status AS run_status,
    f.created_at,
    f.requested_by,
    s.timezone,
    f.reason_params,
    -- The reason as the worker that wrote the row rendered it (in its locale).
    f.reason AS reason_recorded
FROM agentlab_sched.fires f
JOIN agentlab_sched.schedules s ON s.id = f.schedule_id
LEFT JOIN agentlab_sched.runs r ON r.id = f.run_id
ORDER BY f.created_at DESC, f.id DESC;

-- Enabled schedules that nothing is firing: next_run_at older than the on-time window (problem =
-- 'late'), a next fire still unplanned that long after it was asked for (problem = 'unplanned': created
-- or resumed in SQL while no worker runs), or nothing pending and nothing to plan although the schedule is
-- not finished (problem = 'stopped': neither past ends_at nor out of remaining_runs; a cron that no longer
-- parses, or no due time the planner could find). late_by: since when, as far as the row tells.
CREATE OR REPLACE VIEW agentlab_sched.overdue AS
SELECT
    s.id,
    s.name,
    s.cron,
    s.timezone,
    s.next_run_at,
    CASE WHEN s.next_run_at IS NOT NULL THEN now() - s.next_run_at
         WHEN s.replan IS NOT NULL THEN now() - s.updated_at
         ELSE now() - greatest(s.updated_at, (SELECT max(f.created_at) FROM agentlab_sched.fires f
                                              WHERE f.schedule_id = s.id))
    END AS late_by,
    CASE WHEN s.next_run_at IS NOT NULL THEN 'late' WHEN s.replan IS NOT NULL THEN 'unplanned' ELSE 'stopped' END
        AS problem,
    w.on_time_window
FROM agentlab_sched.schedules s
CROSS JOIN (SELECT agentlab_sched.on_time_window() AS on_time_window) w
WHERE s.enabled
  AND (s.next_run_at < now() - w.on_time_window
       OR (s.next_run_at IS NULL AND s.replan IS NOT NULL AND s.updated_at < now() - w.on_time_window)
       OR (s.next_run_at IS NULL AND s.replan IS NULL
           AND (s.ends_at IS NULL OR s.ends_at > now())
           AND (s.remaining_runs IS NULL OR s.remaining_runs > 0)));
