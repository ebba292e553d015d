"""Seeing into a worker: its events (one log record per fire and run change), how they are printed
(lines in the reader's language, or JSON), and its Prometheus metrics.

- :mod:`.events`: the log records and their stable fields;
- :mod:`.output`: the handlers `agentlab-sched worker` and `dev` print with;
- :mod:`.metrics`: ``--metrics-port``.
"""
