"""Firing: turning due times into ledger rows, runs and Procrastinate jobs.

- :mod:`.tick`: ``fire_due(conn, now)``, replanning, manual and backfill requests;
- :mod:`.hooks`: resolvers a host app registers to refuse a launch (``LaunchRefused``);
- :mod:`.blueprint`: the Procrastinate blueprint (the periodic tick and housekeeping tasks).
"""
