-- Whether a schedule has a webhook URL and a secret, as columns of their own: the reader role may read
-- every column of schedules except the ciphertext (docs/security.md), and still see whether it is set.
ALTER TABLE agentlab_sched.schedules
    ADD COLUMN webhook_configured boolean GENERATED ALWAYS AS (webhook_url_enc IS NOT NULL) STORED,
    ADD COLUMN webhook_has_secret boolean GENERATED ALWAYS AS (webhook_secret_enc IS NOT NULL) STORED;
