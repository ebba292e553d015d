"""Built-in tasks the scheduler's blueprint brings: ``sql`` (run a SQL command as a role)."""
