"""On-ramps: schedules made from where people come from (pg_cron's jobs, Procrastinate's periodic tasks).

Each import creates equivalent schedules, paused unless asked to enable them (the old scheduler may still
be firing them), remembers where each came from (``schedules.imported_from``, so importing again skips
what it imported already), and reports what it could not translate and why. ``docs/coming-from.md``.
"""
