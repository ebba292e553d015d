"""The worker process: everything that runs inside a Procrastinate worker.

- :mod:`.process`: ``run_worker`` (``agentlab-sched worker``) and the supervisor of its loops;
- :mod:`.batch`: ``BatchWorker``, taking and finishing jobs in batches;
- :mod:`.jobs`: ``RunJobManager``, the job manager that keeps runs in step and rides out outages;
- :mod:`.middleware`: ``install(app)``, the run middleware around every job of a run;
- :mod:`.blueprint`: the Procrastinate blueprint (the periodic tick and housekeeping tasks);
- :mod:`.precise`: the precise loop that fires on the second, woken by NOTIFY;
- :mod:`.internals`: every private name of Procrastinate the worker relies on, checked by a test.
"""
