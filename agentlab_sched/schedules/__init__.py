"""Schedules and planning: what a schedule is and when it fires.

- :mod:`.cron`: the cron language and its DST rules (pure);
- :mod:`.planner`: what one tick does for one schedule at a given ``now`` (pure, no I/O);
- :mod:`.admin`: the Python admin API (``schedule``, ``alter``, ``pause``, ``resume``, ...).
"""
