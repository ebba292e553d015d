"""A model-based test of the whole run state machine (hypothesis RuleBasedStateMachine) on the real
PostgreSQL, with Procrastinate's own job operations (the SQL functions its worker, job manager and shell
call: fetch, finish, retry, cancel, delete), over schedules covering every overlap policy and every
on_interrupt value. Rules fire due times (an injected clock), trigger, fetch / succeed / fail / retry
jobs, abort, cancel (with and without deleting the job), delete jobs, stall a worker and run
housekeeping, ask for approval, approve / reject, resume / abandon. After every step:

- a run's status agrees with its job's, or its job is gone and the run is terminal (or suspended, or
  awaiting approval with its segment's job gone);
- every non-terminal run has a job that can still run, or is suspended (and shown so), or awaits a
  decision;
- no schedule is blocked (skipped_overlap) by a terminal run or by a run without a job;
- buffer_one never has two waiting runs;
- consecutive_failures equals the failures since the last success (each run counted once);
- every started fire has exactly one run;
- no job that holds a lock or a queueing lock (todo or doing) belongs to a terminal run.

AGENTLAB_SCHED_MODEL_EXAMPLES=N runs N examples drawn at random; by default 100 (Hypothesis's own default)
in four shards, each with a fixed seed (the same examples in every run, spread over the suite's processes).
A scripted path takes every transition the random examples must not miss. A long run:

    AGENTLAB_SCHED_MODEL_EXAMPLES=10000 .venv/bin/pytest -q -s tests/runs/test_run_model.py
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from psycopg.rows import dict_row

from agentlab_sched import database as db
from agentlab_sched.firing.tick import fire_due
from agentlab_sched.settings import Settings

#: Set: that many examples, drawn at random (a long run); unset: the CI's few hundred, the same ones every
#: time (each shard's seed is fixed).
CHOSEN = os.environ.get("AGENTLAB_SCHED_MODEL_EXAMPLES")
EXAMPLES = int(CHOSEN or "100")
#: The run transitions the examples went through (printed with -s: what the model covered).
TRANSITIONS: Counter[str] = Counter()
START = datetime(2026, 10, 5, 1, 0, tzinfo=UTC)
#: Everything the rules' preconditions and the invariants read, in one statement per generation (one
#: round trip after a step instead of ten). Parameters: the terminal run statuses, the last fire checked.
SNAPSHOT = """
SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status = 'doing') AS doing,
       EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status = 'todo') AS todo,
       EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status = 'failed') AS failed,
       EXISTS (SELECT 1 FROM procrastinate_jobs) AS jobs,
       EXISTS (SELECT 1 FROM agentlab_sched.runs WHERE NOT (status = ANY(%(terminal)s))) AS open_runs,
       EXISTS (SELECT 1 FROM agentlab_sched.runs WHERE status = 'running') AS running,
       EXISTS (SELECT 1 FROM agentlab_sched.runs WHERE status = 'suspended') AS suspended,
       EXISTS (SELECT 1 FROM agentlab_sched.approvals WHERE status = 'pending') AS pending,
       EXISTS (SELECT 1 FROM agentlab_sched.schedules WHERE NOT enabled) AS paused,
       -- every run beside its job, in the order they ended (the failure count's model reads them so)
       (SELECT coalesce(jsonb_agg(x ORDER BY x.finished_at NULLS LAST, x.id), '[]') FROM (
            SELECT r.id, r.schedule_id, r.status, r.finished_at, r.job_id, r.error, r.error_code,
                   j.status::text AS job, j.worker_id, w.last_heartbeat > now() - interval '30 seconds' AS live,
                   EXISTS (SELECT 1 FROM agentlab_sched.approvals a WHERE a.run_id = r.id AND a.segment = r.segment
                           AND a.status IN ('pending', 'approved')) AS decidable
            FROM agentlab_sched.runs r LEFT JOIN procrastinate_jobs j ON j.id = r.job_id
            LEFT JOIN procrastinate_workers w ON w.id = j.worker_id) x) AS runs,
       -- the overlap skips recorded since the last check, with the run that blocked each
       (SELECT coalesce(jsonb_agg(x ORDER BY x.id), '[]') FROM (
            SELECT f.id, f.reason_code, f.reason_params, s.overlap,
                   b.status AS blocking, bj.status::text AS blocking_job
            FROM agentlab_sched.fires f JOIN agentlab_sched.schedules s ON s.id = f.schedule_id
            LEFT JOIN agentlab_sched.runs b ON b.id = (f.reason_params ->> 'run_id')::uuid
            LEFT JOIN procrastinate_jobs bj ON bj.id = b.job_id
            WHERE f.status = 'skipped_overlap' AND f.id > %(checked)s) x) AS skipped,
       (SELECT coalesce(max(id), 0) FROM agentlab_sched.fires) AS last_fire,
       (SELECT coalesce(jsonb_agg(x), '[]') FROM (
            SELECT s.name, count(r.id) AS n FROM agentlab_sched.schedules s
            JOIN agentlab_sched.runs r ON r.schedule_id = s.id AND r.status = 'queued' AND r.started_at IS NULL
            WHERE s.overlap = 'buffer_one' GROUP BY s.name HAVING count(r.id) > 1) x) AS buffered_twice,
       (SELECT jsonb_object_agg(id, consecutive_failures) FROM agentlab_sched.schedules) AS failures,
       EXISTS (SELECT 1 FROM agentlab_sched.runs WHERE tally_pending IS NOT NULL) AS tally_pending,
       (SELECT coalesce(jsonb_agg(f.id), '[]') FROM agentlab_sched.fires f
        WHERE f.status = 'started'
          AND ((SELECT count(*) FROM agentlab_sched.runs r WHERE r.fire_id = f.id) <> 1
               OR NOT EXISTS (SELECT 1 FROM agentlab_sched.runs r WHERE r.id = f.run_id))) AS started_without_one_run,
       (SELECT coalesce(jsonb_agg(x), '[]') FROM (
            SELECT j.id, j.status::text AS job, j.lock, r.status FROM procrastinate_jobs j
            JOIN agentlab_sched.runs r ON r.job_id = j.id
            WHERE j.status IN ('todo', 'doing') AND r.status = ANY(%(terminal)s)) x) AS held_for_ended,
       (SELECT coalesce(jsonb_agg(x), '[]') FROM (
            SELECT j.id, j.status::text AS job, j.lock FROM procrastinate_jobs j
            WHERE j.status IN ('todo', 'doing')
              AND NOT EXISTS (SELECT 1 FROM agentlab_sched.runs r
                              WHERE r.job_id = j.id AND NOT (r.status = ANY(%(terminal)s)))) x) AS orphans
"""
EN = Settings(locale="en")
#: What an example starts without: every table the model writes, the referencing ones first.
CLEARED = (
    "procrastinate_periodic_defers", "procrastinate_events", "agentlab_sched.approvals", "agentlab_sched.outbox",
    "agentlab_sched.fire_requests", "agentlab_sched.fires", "agentlab_sched.runs", "procrastinate_jobs",
    "procrastinate_workers", "agentlab_sched.schedules",
)  # fmt: skip
TERMINAL = ["succeeded", "failed", "cancelled", "timed_out"]
#: (name, overlap, on_interrupt, pause_after_failures): every overlap policy and every on_interrupt value.
SCHEDULES = (
    ("skip-suspend", "skip", "suspend", None),
    ("one-retry", "buffer_one", "retry", None),
    ("all-abandon", "buffer_all", "abandon", None),
    ("free-suspend", "allow_all", "suspend", 2),
    ("newest-retry", "cancel_other", "retry", None),
)
#: What a run's status may be beside its job's (None: the job is gone).
AGREES: dict[str, set[str | None]] = {
    "queued": {"todo"},
    "running": {"doing"},
    "awaiting_approval": {"succeeded", "todo", None},  # the asking segment's job; the approved one waiting
    "suspended": {"doing", "aborted", None},  # stalled on a dead worker; aborted by a stopping one; deleted
    "succeeded": {"succeeded", None},
    "failed": {"failed", None},
    "cancelled": {"cancelled", "aborted", "failed", "succeeded", None},
    "timed_out": {"aborted", "failed", "succeeded", None},
}


#: How Procrastinate's job functions refuse a job not in the status they need (RAISE, SQLSTATE P0001).
PROCRASTINATE_REFUSALS = (
    'Job was not found or not in "doing" status',
    'Job was not found or not in "doing" or "todo" status',
    "Job was not found or has an invalid status to retry",
)
#: Procrastinate's own CHECK, which its retry of a job that had an abort requested breaks (it sets the job
#: back to todo and leaves abort_requested set).
ABORT_REQUESTED_CHECK = "check_not_todo_abort_requested"


def procrastinate_refused(exc: psycopg.Error, abort_requested: bool = False) -> bool:
    """Whether ``exc`` is one of Procrastinate's own refusals, and not an error of our triggers or
    functions (which raise with SQLSTATEs and messages of their own): a RAISE of its job functions, or,
    for a retry of a job that had an abort requested (``abort_requested``), its CHECK."""
    if isinstance(exc, psycopg.errors.RaiseException):
        # Raised by Procrastinate's function itself (the innermost frame), not by a trigger it set off.
        raised_by = (exc.diag.context or "").startswith("PL/pgSQL function procrastinate_")
        return raised_by and (exc.diag.message_primary or "").startswith(PROCRASTINATE_REFUSALS)
    if isinstance(exc, psycopg.errors.CheckViolation):
        return abort_requested and exc.diag.constraint_name == ABORT_REQUESTED_CHECK
    return False


class RunModel(RuleBasedStateMachine):
    url: str

    def __init__(self) -> None:
        super().__init__()
        #: Bumped by every write (q(), a tick): what was read at one generation holds until the next.
        self.generation = 0
        self._snapshot: tuple[int, dict[str, Any]] | None = None
        self._settled = -1
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(db.connect(self.url, locale="en"))
        # The snapshot's reader: a statement of twenty subqueries over the partitioned tables takes five times
        # longer to plan than to run, so it is prepared and planned once (a generic plan), on a connection
        # of its own: the product's connections prepare nothing and plan every statement (connect_kwargs),
        # and what it runs on `conn` is planned as in production.
        self.reader = self.loop.run_until_complete(
            psycopg.AsyncConnection.connect(self.url, autocommit=True, row_factory=dict_row)
        )
        self.loop.run_until_complete(self.reader.execute("SET plan_cache_mode = force_generic_plan"))
        # The previous example's rows, deleted (referencing before referenced): a few dozen rows, where a
        # TRUNCATE of these tables would make new files for every partition and index, thirty times slower.
        for table in CLEARED:
            self.q(f"DELETE FROM {table}")
        self.q("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        self.now = START
        self.ids: dict[str, int] = {}
        for name, overlap, on_interrupt, pause in SCHEDULES:
            row = self.one(
                """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, overlap, on_interrupt,
                       pause_after_failures, next_run_at, replan)
                   VALUES (%s, '* * * * *', 'demo.echo', 'UTC', %s, %s, %s, %s, NULL) RETURNING id""",
                (name, overlap, on_interrupt, pause, START),
            )
            self.ids[name] = row["id"]
        self.worker = self.new_worker()
        #: The model of consecutive_failures: per schedule, the count and the runs counted since the last reset.
        self.count = dict.fromkeys(self.ids.values(), 0)
        self.counted: dict[int, set[Any]] = {sid: set() for sid in self.ids.values()}
        self.seen: dict[Any, str] = {}
        self.fires_checked = 0

    def teardown(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.run_until_complete(self.reader.close())
        self.loop.close()

    # ----------------------------------------------------------------------------------------- helpers

    def q(self, sql: str, params: Any = None) -> None:
        self.generation += 1
        self.loop.run_until_complete(self.conn.execute(sql, params))

    def fire(self) -> None:
        """A tick at the model's clock."""
        self.generation += 1
        self.loop.run_until_complete(fire_due(self.conn, self.now, settings=EN))

    def snapshot(self) -> dict[str, Any]:
        """What the preconditions and the invariants read (`SNAPSHOT`), once per generation."""
        if self._snapshot is None or self._snapshot[0] != self.generation:
            params = {"terminal": TERMINAL, "checked": self.fires_checked}
            cur = self.loop.run_until_complete(self.reader.execute(SNAPSHOT, params, prepare=True))
            row = self.loop.run_until_complete(cur.fetchone())
            assert row is not None  # a SELECT without FROM: always one row
            self._snapshot = (self.generation, row)
        return self._snapshot[1]

    def state(self, name: str) -> bool:
        """What the rules' preconditions ask (is there a doing job, a pending approval, ...)."""
        return bool(self.snapshot()[name])

    def procrastinate(self, sql: str, params: Any = None, abort_requested: bool = False) -> None:
        """A Procrastinate operation, which Procrastinate itself may refuse: then nothing changed, and the
        model goes on. Only its own refusals pass (see `procrastinate_refused`); any error of our
        triggers or functions fails the example."""
        try:
            self.q(sql, params)
        except psycopg.Error as exc:
            if not procrastinate_refused(exc, abort_requested):
                raise

    def one(self, sql: str, params: Any = None) -> Any:
        cur = self.loop.run_until_complete(self.conn.execute(sql, params))
        return self.loop.run_until_complete(cur.fetchone())

    def all(self, sql: str, params: Any = None) -> list[Any]:
        cur = self.loop.run_until_complete(self.conn.execute(sql, params))
        return self.loop.run_until_complete(cur.fetchall())

    @staticmethod
    def pick(data: st.DataObject, items: list[Any]) -> Any:
        """One of ``items`` (ordered the same way in every example): drawn as an index, so that the data
        hypothesis draws does not depend on the database's ids."""
        return items[data.draw(st.integers(min_value=0, max_value=10**6)) % len(items)]

    def new_worker(self) -> int:
        return self.one("SELECT * FROM procrastinate_register_worker_v1()")["worker_id"]

    def jobs(self, status: str) -> list[int]:
        return [r["id"] for r in self.all("SELECT id FROM procrastinate_jobs WHERE status = %s ORDER BY id", (status,))]

    def abort_requested(self, job_id: int) -> bool:
        row = self.one("SELECT abort_requested FROM procrastinate_jobs WHERE id = %s", (job_id,))
        return bool(row["abort_requested"])

    def runs(self, status: str) -> list[Any]:
        query = "SELECT id FROM agentlab_sched.runs WHERE status = %s ORDER BY fire_id, created_at"
        return [r["id"] for r in self.all(query, (status,))]

    def settle_model(self) -> None:
        """Count what the step did to runs: a run that became failed/timed_out counts (once until a reset),
        one that became succeeded resets its schedule's count; resuming a paused schedule resets it."""
        if self._settled == self.generation:
            return  # nothing was written since
        self._settled = self.generation
        for r in self.snapshot()["runs"]:
            before = self.seen.get(r["id"])
            self.seen[r["id"]] = r["status"]
            if r["status"] == before or r["schedule_id"] is None:
                continue
            TRANSITIONS[f"{before or 'new'} -> {r['status']}"] += 1
            sid = r["schedule_id"]
            if r["status"] == "succeeded":
                self.count[sid] = 0
                self.counted[sid] = set()
            elif r["status"] in ("failed", "timed_out") and r["id"] not in self.counted[sid]:
                self.count[sid] += 1
                self.counted[sid].add(r["id"])

    # ------------------------------------------------------------------------------------------- rules

    @rule(seconds=st.integers(min_value=1, max_value=150))
    def tick(self, seconds: int) -> None:
        """The clock moves on; a tick fires what is due (on time, or a misfire/backlog after a long gap)."""
        self.now += timedelta(seconds=seconds)
        self.fire()

    @rule(name=st.sampled_from([s[0] for s in SCHEDULES]))
    def trigger(self, name: str) -> None:
        """A manual fire (the SQL trigger(), carried out by the next tick)."""
        if self.one("SELECT enabled FROM agentlab_sched.schedules WHERE name = %s", (name,))["enabled"]:
            self.q("SELECT agentlab_sched.trigger(%s)", (name,))
            self.fire()

    @rule(n=st.integers(min_value=1, max_value=3))
    def fetch(self, n: int) -> None:
        """The worker takes up to n jobs, as its fetch loop does."""
        for _ in range(n):
            self.procrastinate("SELECT * FROM procrastinate_fetch_job_v2(NULL, %s)", (self.worker,))

    @precondition(lambda self: self.state("doing"))
    @rule(data=st.data(), status=st.sampled_from(["succeeded", "failed"]), delete=st.booleans())
    def finish(self, data: st.DataObject, status: str, delete: bool) -> None:
        """A worker finishes a job, with the middleware's record first (it is what a deleted job ends as)."""
        jid = self.pick(data, (self.jobs("doing")))
        run = self.one("SELECT id FROM agentlab_sched.runs WHERE job_id = %s AND status = 'running'", (jid,))
        if run is not None and status == "succeeded":
            self.q("SELECT agentlab_sched.record_result(%s, %s, %s::jsonb)", (run["id"], jid, json.dumps({"ok": 1})))
        elif run is not None:
            self.q("SELECT agentlab_sched.record_task_error(%s, %s, 'boom', 'run.task_failed')", (run["id"], jid))
        self.procrastinate("SELECT procrastinate_finish_job_v1(%s, %s, %s)", (jid, status, delete))

    @precondition(lambda self: self.state("doing"))
    @rule(data=st.data())
    def retry_running(self, data: st.DataObject) -> None:
        """The attempt failed and Procrastinate retries the job (a task with retry=)."""
        jid = self.pick(data, (self.jobs("doing")))
        query = "SELECT procrastinate_retry_job_v2(%s, NULL, NULL, NULL, NULL)"
        self.procrastinate(query, (jid,), abort_requested=self.abort_requested(jid))

    @precondition(lambda self: self.state("failed"))
    @rule(data=st.data())
    def retry_failed(self, data: st.DataObject) -> None:
        """`retry N` in the procrastinate shell."""
        jid = self.pick(data, (self.jobs("failed")))
        query = "SELECT procrastinate_retry_job_v2(%s, now(), NULL, NULL, NULL)"
        self.procrastinate(query, (jid,), abort_requested=self.abort_requested(jid))

    @precondition(lambda self: self.state("doing"))
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        """The worker aborts a job: asked to (an abort request), or stopping (nobody asked: interrupted)."""
        jid = self.pick(data, (self.jobs("doing")))
        self.procrastinate("SELECT procrastinate_finish_job_v1(%s, 'aborted', false)", (jid,))

    @precondition(lambda self: self.state("open_runs"))
    @rule(data=st.data())
    def cancel_run(self, data: st.DataObject) -> None:
        query = "SELECT id FROM agentlab_sched.runs WHERE NOT (status = ANY(%s)) ORDER BY fire_id, created_at"
        rid = self.pick(data, [r["id"] for r in self.all(query, (TERMINAL,))])
        self.q("SELECT agentlab_sched.cancel_run(%s, 'model')", (rid,))

    @precondition(lambda self: self.state("todo") or self.state("doing"))
    @rule(data=st.data(), delete=st.booleans())
    def procrastinate_cancel(self, data: st.DataObject, delete: bool) -> None:
        """Procrastinate's cancel (with abort for a running job), with or without deleting the job."""
        jid = self.pick(data, (self.jobs("todo") + self.jobs("doing")))
        self.procrastinate("SELECT procrastinate_cancel_job_v1(%s, true, %s)", (jid, delete))

    @precondition(lambda self: self.state("jobs"))
    @rule(data=st.data())
    def delete_job(self, data: st.DataObject) -> None:
        """A DELETE by hand (or retention): any job, finished or not."""
        jid = self.pick(data, ([r["id"] for r in self.all("SELECT id FROM procrastinate_jobs ORDER BY id")]))
        self.q("DELETE FROM procrastinate_jobs WHERE id = %s", (jid,))

    @rule()
    def stall_and_housekeeping(self) -> None:
        """The worker dies (its heartbeat stops); housekeeping finds its runs; another worker takes over."""
        self.q(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = %s", (self.worker,)
        )
        self.q("SELECT agentlab_sched.housekeeping(now(), interval '30 seconds', NULL, interval '10 seconds', 100)")
        self.worker = self.new_worker()

    @precondition(lambda self: self.state("running"))
    @rule(data=st.data())
    def ask_approval(self, data: st.DataObject) -> None:
        """The task raises AwaitApproval: the middleware's call, then its job ends normally."""
        rid = self.pick(data, (self.runs("running")))
        jid = self.one("SELECT job_id FROM agentlab_sched.runs WHERE id = %s", (rid,))["job_id"]
        self.q("SELECT agentlab_sched.await_approval(%s, %s, 'ok?', '{}'::jsonb)", (rid, jid))
        self.procrastinate("SELECT procrastinate_finish_job_v1(%s, 'succeeded', false)", (jid,))

    @precondition(lambda self: self.state("pending"))
    @rule(data=st.data(), approve=st.booleans())
    def decide(self, data: st.DataObject, approve: bool) -> None:
        rid = self.pick(data, ([r["run_id"] for r in self.all(
            "SELECT run_id FROM agentlab_sched.approvals a JOIN agentlab_sched.runs r ON r.id = a.run_id "
            "WHERE a.status = 'pending' AND r.status = 'awaiting_approval' AND a.segment = r.segment ORDER BY a.id"
        )] or [None]))  # fmt: skip
        if rid is not None:
            self.q(f"SELECT agentlab_sched.{'approve' if approve else 'reject'}(%s, 'model')", (rid,))

    @precondition(lambda self: self.state("suspended"))
    @rule(data=st.data(), resume=st.booleans())
    def settle_suspended(self, data: st.DataObject, resume: bool) -> None:
        rid = self.pick(data, (self.runs("suspended")))
        self.q(f"SELECT agentlab_sched.{'resume_run' if resume else 'abandon'}(%s, 'model')", (rid,))

    @precondition(lambda self: self.state("paused"))
    @rule()
    def resume_paused(self) -> None:
        for row in self.all("SELECT id, name FROM agentlab_sched.schedules WHERE NOT enabled"):
            self.q("SELECT agentlab_sched.resume(%s)", (row["name"],))
            self.count[row["id"]] = 0
            self.counted[row["id"]] = set()
        self.q("UPDATE agentlab_sched.schedules SET next_run_at = %s, replan = NULL WHERE next_run_at IS NULL",
               (self.now + timedelta(minutes=1),))  # fmt: skip

    # ------------------------------------------------------------------------------------- invariants

    @invariant()
    def runs_follow_their_jobs(self) -> None:
        self.settle_model()
        for r in self.snapshot()["runs"]:
            assert r["job"] in AGREES[r["status"]], r
            # Every run not ended can still go on: its job waits or runs on a live worker, or a person acts.
            if r["status"] == "queued":
                assert r["job"] == "todo", r
            elif r["status"] == "running":
                assert r["job"] == "doing" and r["live"], r
            elif r["status"] == "awaiting_approval":
                assert r["decidable"], r
            elif r["status"] == "suspended":  # shown so: its error says what happened and what to do
                assert r["error_code"] in ("run.suspended", "run.suspended_after_retries") and r["error"], r

    @invariant()
    def no_schedule_is_blocked_by_an_ended_run_or_one_without_a_job(self) -> None:
        snapshot = self.snapshot()
        for f in snapshot["skipped"]:
            if f["reason_code"] in ("overlap.in_progress", "overlap.awaiting_approval", "overlap.suspended"):
                assert f["blocking"] not in TERMINAL, f
                assert f["blocking_job"] is not None or f["blocking"] in ("suspended", "awaiting_approval"), f
        self.fires_checked = snapshot["last_fire"]

    @invariant()
    def buffer_one_keeps_at_most_one_waiting_run(self) -> None:
        assert self.snapshot()["buffered_twice"] == []

    @invariant()
    def failures_are_counted_once_since_the_last_success(self) -> None:
        self.settle_model()
        failures = {int(sid): n for sid, n in self.snapshot()["failures"].items()}
        assert failures == self.count, (failures, self.count)
        assert not self.snapshot()["tally_pending"]

    @invariant()
    def every_started_fire_has_one_run(self) -> None:
        assert self.snapshot()["started_without_one_run"] == []

    @invariant()
    def no_lock_is_held_for_an_ended_run(self) -> None:
        assert self.snapshot()["held_for_ended"] == []

    @invariant()
    def every_waiting_or_running_job_belongs_to_a_run_that_goes_on(self) -> None:
        """No job left behind by a run that moved on to another job (a retry, a resume) or ended: it would
        hold its lock against the next one, or run a body without its run."""
        assert self.snapshot()["orphans"] == []


#: Shards of the CI's examples, each its own test (xdist spreads them over its processes), each with its
#: own fixed seed: the same examples in every run.
SHARDS = 1 if CHOSEN else 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_the_run_state_machine(db_url: str, shard: int) -> None:
    RunModel.url = db_url
    machine: type[RunModel] = RunModel
    if CHOSEN is None:
        machine = seed(shard)(type(f"RunModelShard{shard}", (RunModel,), {}))
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES // SHARDS,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        ),
    )
    print(f"{EXAMPLES // SHARDS} examples; run transitions seen: {dict(sorted(TRANSITIONS.items()))}")


class Drawn:
    """What a rule's ``data`` gives ``pick`` in a scripted path: the item at a chosen place."""

    def __init__(self, index: int) -> None:
        self.index = index

    def draw(self, strategy: Any) -> int:
        return self.index


def test_a_scripted_path_goes_through_every_transition_with_the_invariants_holding(db_url: str) -> None:
    """The transitions random examples must not miss, each reached by a path written out (the random
    examples explore around them; this one makes sure each is taken), every invariant checked after each
    step."""
    RunModel.url = db_url
    TRANSITIONS.clear()
    m = RunModel()

    def step(rule: Any, *args: Any, **kwargs: Any) -> None:
        rule(*args, **kwargs)
        for check in m.invariants:  # the machine's own list, as hypothesis checks them
            check.function(m)

    first = Drawn(0)
    try:
        step(m.tick, 60)  # five runs queued
        step(m.fetch, 3)  # three running
        step(m.finish, first, "failed", False)  # running -> failed
        step(m.retry_failed, first)  # failed -> queued
        step(m.fetch, 1)
        step(m.retry_running, first)  # running -> queued
        step(m.fetch, 3)
        step(m.ask_approval, first)  # running -> awaiting_approval
        step(m.stall_and_housekeeping)  # running -> suspended (or queued again, by on_interrupt=retry)
        step(m.settle_suspended, first, True)  # suspended -> queued
        step(m.stall_and_housekeeping)
        step(m.fetch, 3)
        step(m.cancel_run, first)
        step(m.stall_and_housekeeping)
        step(m.settle_suspended, first, False)  # suspended -> cancelled
        step(m.tick, 60)
        step(m.fetch, 3)
        step(m.cancel_run, Drawn(1))
    finally:
        m.teardown()
    print(dict(sorted(TRANSITIONS.items())))
    assert {"running -> suspended", "running -> queued", "running -> cancelled", "queued -> cancelled",
            "running -> failed", "failed -> queued", "running -> awaiting_approval",
            "suspended -> queued", "suspended -> cancelled"} <= set(TRANSITIONS)  # fmt: skip
