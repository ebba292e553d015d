"""The dashboard's tests' site (the ``web`` fixture of tests/web/conftest.py): one test's database, its
logins, and HTTP clients of the app signed in as them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
from psycopg.rows import TupleRow
from starlette.testclient import TestClient

from agentlab_sched import database as db
from agentlab_sched.database.roles import RoleNames
from agentlab_sched.schedules import admin
from agentlab_sched.schedules.admin import Schedule
from agentlab_sched.settings import Settings
from agentlab_sched.web import WebConfig, create_app

PASSWORD = "agentlab-test"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Web:
    """One test's database, its logins, and clients of the dashboard on it."""

    db_url: str
    groups: RoleNames
    reader: str
    admin: str
    oncall: str
    clients: list[TestClient] = field(default_factory=list)

    def client(self, *, read_only: bool = False, local: bool = False, base_path: str = "/") -> TestClient:
        """A client of a new app (its lifespan running: the live hub, the sessions)."""
        config = WebConfig(
            database_url=self.db_url, settings=Settings.from_env(), read_only=read_only, local=local,
            base_path=base_path,
        )  # fmt: skip
        client = TestClient(create_app(config), follow_redirects=False)
        client.__enter__()
        self.clients.append(client)
        return client

    def csrf(self, client: TestClient, path: str = "/login") -> str:
        """The CSRF token of the client's session, read from a page's form (the login form's when that page
        has none: a reader's pages have no post form)."""
        found = CSRF.search(client.get(path).text) or CSRF.search(client.get("/login").text)
        assert found is not None, "no CSRF token on " + path
        return found.group(1)

    def sign_in(self, client: TestClient, who: str, password: str = PASSWORD) -> httpx.Response:
        """Sign ``who`` in through the login form; the response (303 to /schedules when accepted)."""
        token = self.csrf(client)
        return client.post("/login", data={"username": who, "password": password, "csrf": token})

    def signed_in(self, who: str, **options: Any) -> TestClient:
        client = self.client(**options)
        response = self.sign_in(client, who)
        assert response.status_code == 303, response.text
        return client

    def post(self, client: TestClient, path: str, **data: Any) -> httpx.Response:
        """Post a form on ``path`` with the session's token (read from that page)."""
        return client.post(path, data={"csrf": self.csrf(client, path), **data})

    # (``Schedule`` by its own name: in this class ``admin`` is the admin login's field.)
    def schedule(self, name: str, cron: str = "0 9 * * *", task: str = "demo.echo", **options: Any) -> Schedule:
        """A schedule made through the Python API (as the owner)."""

        async def make() -> Schedule:
            conn = await db.connect(self.db_url, locale="en")
            try:
                return await admin.schedule(conn, name, cron, task, {}, **options)
            finally:
                await conn.close()

        # In a thread of its own: the browser tests' Playwright runs an event loop in this one.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, make()).result()

    def owner(self) -> psycopg.Connection[TupleRow]:
        return psycopg.connect(self.db_url, autocommit=True)

    def launch(self, name: str) -> str:
        """A run of schedule ``name`` started as a worker would (launch(), then its job taken): its id."""
        with self.owner() as conn:
            conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo', 'demo.ask'])")
            with conn.transaction():
                conn.execute("SELECT 1 FROM agentlab_sched.schedules WHERE name = %s FOR UPDATE", (name,))
                row = conn.execute(
                    """SELECT agentlab_sched.launch(s, clock_timestamp(), 'manual', NULL, 'manual:test') AS r
                       FROM agentlab_sched.schedules s WHERE s.name = %s""",
                    (name,),
                ).fetchone()
            assert row is not None and row[0]["status"] == "started", row
            run_id = str(row[0]["run_id"])
            conn.execute(
                "UPDATE procrastinate_jobs SET status = 'doing' WHERE id = "
                "(SELECT job_id FROM agentlab_sched.runs WHERE id = %s)",
                (run_id,),
            )
        return run_id

    def awaiting(self, name: str, title: str = "Send the report?") -> str:
        """A run of ``name`` that asked for approval (the middleware's part of AwaitApproval): its id."""
        run_id = self.launch(name)
        with self.owner() as conn:
            job = conn.execute("SELECT job_id FROM agentlab_sched.runs WHERE id = %s", (run_id,)).fetchone()
            assert job is not None
            conn.execute("SELECT agentlab_sched.await_approval(%s, %s, %s, '{}'::jsonb)", (run_id, job[0], title))
            conn.execute("UPDATE procrastinate_jobs SET status = 'succeeded' WHERE id = %s", (job[0],))
        return run_id

    def suspended(self, name: str) -> str:
        """A run of ``name`` whose worker stopped heartbeating (stalled-job detection): its id."""
        run_id = self.launch(name)
        with self.owner() as conn:
            worker = conn.execute(
                "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now() - interval '1 hour') RETURNING id"
            ).fetchone()
            assert worker is not None
            conn.execute(
                "UPDATE procrastinate_jobs SET worker_id = %s WHERE id = "
                "(SELECT job_id FROM agentlab_sched.runs WHERE id = %s)",
                (worker[0], run_id),
            )
            conn.execute("SELECT agentlab_sched.detect_suspended(now(), interval '30 seconds')")
            status = conn.execute("SELECT status FROM agentlab_sched.runs WHERE id = %s", (run_id,)).fetchone()
        assert status == ("suspended",), status
        return run_id

    def run_status(self, run_id: str) -> str:
        with self.owner() as conn:
            row = conn.execute("SELECT status FROM agentlab_sched.runs WHERE id = %s", (run_id,)).fetchone()
        assert row is not None
        return str(row[0])
