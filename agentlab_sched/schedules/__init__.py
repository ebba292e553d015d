"""Schedules: creating, changing and re-planning them.

- :mod:`.admin`: the Python admin API (``schedule``, ``alter``, ``pause``, ``resume``, ...);
- :mod:`.code`: schedules defined in code (``@agentlab_sched.schedule``) and their sync;
- :mod:`.replan`: planning the next fire of schedules whose definition changed.
"""
