"""The pure core: no I/O, an injected clock, everything the rest plans with.

- :mod:`.cron`: the cron language and its DST rules;
- :mod:`.planner`: what one tick does for one schedule at a given ``now``;
- :mod:`.options`: the schedule options, one table that the CLI, the Python API and SQL are derived from.
"""
