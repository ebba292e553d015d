-- Notifications: the outbox dispatcher (notify/dispatcher.py) and the webhook settings of a schedule
-- (notify/webhooks.py). The outbox rows are written by database/sql/60_notify.sql.

-- name: claim_outbox
-- The oldest pending outbox row due at %(now)s, locked (SKIP LOCKED), with what sending it needs.
SELECT o.id, o.run_id::text AS run_id, o.event, o.segment, o.attempts, o.payload,
       s.id AS schedule_id, s.name AS schedule, s.timezone, s.timeout AS schedule_timeout,
       s.webhook_format, s.webhook_url_enc, s.webhook_secret_enc, s.webhook_events,
       r.status AS run_status,
       agentlab_sched.run_error_text(r.error, r.error_term) AS run_error,
       agentlab_sched.run_error_text(o.payload ->> 'error', o.payload -> 'error_term') AS event_error,
       r.started_at, r.finished_at, r.timeout AS run_timeout,
       f.kind, f.fire_at, a.title AS step
  FROM agentlab_sched.outbox o
  LEFT JOIN agentlab_sched.schedules s ON s.id = o.schedule_id
  LEFT JOIN agentlab_sched.runs r ON r.id = o.run_id
  LEFT JOIN agentlab_sched.fires f ON f.id = r.fire_id
  LEFT JOIN agentlab_sched.approvals a ON a.run_id = o.run_id AND a.segment = o.segment
 WHERE o.status = 'pending' AND o.next_attempt_at <= %(now)s
 ORDER BY o.next_attempt_at, o.id
 LIMIT 1
   FOR UPDATE OF o SKIP LOCKED

-- name: close_outbox_row
-- End outbox row %(id)s without sending it (%(status)s: dropped or failed), recording why.
WITH closed AS (
    UPDATE agentlab_sched.outbox SET status = %(status)s, last_error = %(detail)s WHERE id = %(id)s
)
INSERT INTO agentlab_sched.deliveries (outbox_id, attempted_at, outcome, detail)
VALUES (%(id)s, %(now)s, %(status)s, %(detail)s)

-- name: outbox_wait_for_key
-- Leave row %(id)s for a worker that can decrypt its webhook: due again at %(at)s, saying why; not an attempt.
UPDATE agentlab_sched.outbox SET next_attempt_at = %(at)s, last_error = %(detail)s WHERE id = %(id)s AND status = 'pending'

-- name: outbox_next_attempt
-- Outbox row %(id)s is next tried at %(at)s (a lease, a rate limit, a cancelled send), while pending.
UPDATE agentlab_sched.outbox SET next_attempt_at = %(at)s WHERE id = %(id)s AND status = 'pending'

-- name: lock_bot
-- Serialise the send slots of bot %(bot)s across workers (for this transaction).
SELECT pg_advisory_xact_lock(hashtextextended('agentlab_sched.bot:' || %(bot)s, 0))

-- name: bot_window_full
-- When bot %(bot)s had %(count)s sends in (%(since)s, %(now)s]: the oldest of them, else no row.
SELECT sent_at FROM agentlab_sched.bot_sends
 WHERE bot = %(bot)s AND sent_at > %(since)s AND sent_at <= %(now)s
 ORDER BY sent_at DESC OFFSET %(count)s - 1 LIMIT 1

-- name: take_bot_slot
-- Record a send of bot %(bot)s at %(now)s, forgetting its sends before %(before)s.
WITH forgotten AS (
    DELETE FROM agentlab_sched.bot_sends WHERE bot = %(bot)s AND sent_at < %(before)s
)
INSERT INTO agentlab_sched.bot_sends (bot, sent_at) VALUES (%(bot)s, %(now)s)

-- name: record_delivery
-- One attempt of outbox row %(id)s and its verdict; the row becomes %(status)s (sent, failed, pending).
WITH attempt AS (
    INSERT INTO agentlab_sched.deliveries
        (outbox_id, attempted_at, http_status, platform_code, platform_text, outcome, detail)
    VALUES (%(id)s, %(at)s, %(http_status)s, %(platform_code)s, %(platform_text)s, %(outcome)s, %(detail)s)
)
UPDATE agentlab_sched.outbox
   SET status = %(status)s, attempts = %(attempts)s, last_error = %(last_error)s,
       next_attempt_at = coalesce(%(next_at)s, next_attempt_at),
       sent_at = CASE WHEN %(status)s = 'sent' THEN %(at)s ELSE sent_at END
 WHERE id = %(id)s

-- name: release_outbox_row
-- A send of outbox row %(id)s was cancelled: recorded as interrupted, and the row is due again at %(at)s.
WITH attempt AS (
    INSERT INTO agentlab_sched.deliveries (outbox_id, attempted_at, outcome, detail)
    VALUES (%(id)s, %(at)s, 'interrupted', %(detail)s)
)
UPDATE agentlab_sched.outbox SET next_attempt_at = %(at)s WHERE id = %(id)s AND status = 'pending'

-- name: outbox_next_due
-- Seconds until the earliest pending outbox row is due (negative when overdue; NULL when none).
SELECT extract(epoch FROM min(next_attempt_at) - clock_timestamp()) AS wait
FROM agentlab_sched.outbox WHERE status = 'pending'

-- name: listen_outbox
-- Be woken by every new outbox row (the NOTIFY of the outbox trigger).
LISTEN agentlab_sched_outbox

-- name: schedule_webhook
-- The webhook settings of schedule %(name)s (ciphertext included), and the version they belong to.
SELECT id, name, version, timezone, webhook_format, webhook_url_enc, webhook_secret_enc, webhook_url_hint,
       webhook_events
FROM agentlab_sched.schedules WHERE name = %(name)s

-- name: set_webhook
-- Store the webhook settings of schedule %(name)s (URL and secret as ciphertext), unless it changed since
-- %(version)s.
SELECT agentlab_sched.set_webhook(%(name)s, %(version)s, %(format)s, %(url_enc)s, %(secret_enc)s, %(hint)s,
                                  %(events)s)

-- name: webhook_ciphertexts
-- Every schedule with a webhook URL or secret, to re-encrypt them.
SELECT id, name, webhook_url_enc, webhook_secret_enc FROM agentlab_sched.schedules
WHERE webhook_url_enc IS NOT NULL OR webhook_secret_enc IS NOT NULL
ORDER BY name

-- name: rotate_webhook
-- Replace the ciphertext of schedule %(id)s by the same values under the newest key (bookkeeping).
SELECT agentlab_sched.rotate_webhook(%(id)s, %(old_url_enc)s, %(url_enc)s, %(old_secret_enc)s, %(secret_enc)s)

-- name: pending_webhooks
-- Schedules with pending notifications and a webhook: its ciphertext, and how many are pending.
SELECT s.id, s.name, s.webhook_url_enc, s.webhook_secret_enc, count(*) AS pending
  FROM agentlab_sched.outbox o JOIN agentlab_sched.schedules s ON s.id = o.schedule_id
 WHERE o.status = 'pending' AND s.webhook_url_enc IS NOT NULL
 GROUP BY s.id ORDER BY s.name
