"""Firing: turning due times into ledger rows, runs and Procrastinate jobs.

- :mod:`.tick`: ``fire_due(conn, now)``, one tick;
- :mod:`.requests`: manual and backfill fires (``trigger``, ``backfill``) and their requests;
- :mod:`.hooks`: resolvers a host app registers to refuse a launch (``LaunchRefused``).
"""
