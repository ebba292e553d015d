"""Runs and their lifecycle, from the first job to the end.

- :mod:`.lifecycle`: the Python API of runs (approve, reject, resume, abandon, cancel, prune, read);
- :mod:`.context`: ``current_run()``, what a task knows about its run;
- :mod:`.approvals`: ``AwaitApproval``, runs that pause for a person;
- :mod:`.housekeeping`: the periodic checks (suspended runs, timeouts, retention).
"""
