"""Fixtures for tests against real clusters of Debian's PostgreSQL 15: a primary, a streaming hot standby
made with pg_basebackup, PgBouncer in transaction pooling mode in front of the primary, and a Citus
coordinator with two workers.

Every server runs as an unprivileged OS user (PostgreSQL refuses root, and CI runs as root: the servers
then run as ``postgres``, or ``nobody``), with its data, its unix socket and its log in a temporary
directory and a free TCP port on 127.0.0.1. Whatever is not installed here (PostgreSQL 15 in
/usr/lib/postgresql/15/bin, pgbouncer, Citus) makes the tests that need it skip, saying what to install.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from agentlab_sched.database.migrate import migrate
from tests.support.scratch import server_dir

PG15_BIN = Path("/usr/lib/postgresql/15/bin")
PGBOUNCER = Path("/usr/sbin/pgbouncer")
CITUS_LIB = Path("/usr/lib/postgresql/15/lib/citus.so")
#: Seconds a server gets to start or to stop.
START_TIMEOUT = 60
_counter = itertools.count()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_user() -> str | None:
    """The user servers run as when we are root (None: we are not root, they run as us)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    pytest.skip("running as root and there is no 'postgres' or 'nobody' user to run PostgreSQL as")


def as_user(command: Sequence[str]) -> list[str]:
    """``command`` run as the servers' unprivileged user (unchanged when we are not root)."""
    user = server_user()
    if user is None:
        return list(command)
    # HOME is the user's own: setpriv keeps root's, and a server's outgoing libpq connections (Citus's
    # nodes to each other, over TCP) look for a client certificate under $HOME/.postgresql, where a /root
    # the user cannot enter fails the connection ("could not open certificate file ... Permission denied").
    home = pwd.getpwnam(user).pw_dir
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", "env", f"HOME={home}", *command]


def owned_tempdir(prefix: str) -> Path:
    """A temporary directory the servers' user owns."""
    root = server_dir(prefix)
    user = server_user()
    if user is not None:
        shutil.chown(root, user, user)
    root.chmod(0o700)
    return root


def missing_pg15() -> str | None:
    if not (PG15_BIN / "postgres").exists():
        return f"PostgreSQL 15 is not installed in {PG15_BIN} (apt-get install postgresql-15)"
    return None


def require_pg15() -> None:
    why = missing_pg15()
    if why:
        pytest.skip(f"no system PostgreSQL 15 here: {why}")


def with_db(url: str, name: str) -> str:
    return conninfo.make_conninfo(url, dbname=name)


@dataclass
class PgServer:
    """One PostgreSQL 15 server in ``root`` (data in ``root/data``, socket in ``root/sock``)."""

    root: Path
    port: int
    settings: dict[str, str] = field(default_factory=dict)
    listen: str = "127.0.0.1"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sock(self) -> Path:
        return self.root / "sock"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(
        self, dbname: str = "postgres", *, user: str = "postgres", tcp: bool = False, host: str | None = None
    ) -> str:
        """A URL of this server: over its unix socket, or with ``tcp`` over its first listen address (or ``host``)."""
        host = host or (self.listen.split(",")[0] if tcp else str(self.sock))
        return conninfo.make_conninfo(host=host, port=self.port, dbname=dbname, user=user)

    def initdb(self) -> None:
        self.sock.mkdir(exist_ok=True)
        user = server_user()
        if user is not None:
            shutil.chown(self.sock, user, user)
        subprocess.run(
            as_user([str(PG15_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                     "-E", "UTF8", "--locale=C.UTF-8"]),
            check=True, stdout=subprocess.DEVNULL, timeout=START_TIMEOUT,
        )  # fmt: skip
        self.configure()
        with (self.data / "pg_hba.conf").open("a") as hba:  # the test's own servers: trust, replication too
            hba.write(
                "local replication all trust\nhost replication all 0.0.0.0/0 trust\nhost all all 0.0.0.0/0 trust\n"
            )

    def configure(self) -> None:
        settings = {
            "port": str(self.port),
            "listen_addresses": f"'{self.listen}'",
            "unix_socket_directories": f"'{self.sock}'",
            "max_connections": "200",
            "shared_buffers": "128MB",
            "wal_level": "replica",
            "max_wal_senders": "5",
            "hot_standby": "on",
            "fsync": "on",
            **self.settings,
        }
        with (self.data / "postgresql.auto.conf").open("a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))

    def start(self) -> None:
        subprocess.run(
            as_user([str(PG15_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                     "-t", str(START_TIMEOUT), "start"]),
            check=True, stdout=subprocess.DEVNULL, timeout=START_TIMEOUT + 5,
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            as_user([str(PG15_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=40,
        )  # fmt: skip

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def execute(self, *statements: str, dbname: str = "postgres") -> None:
        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def rows(self, query: str, *params: Any, dbname: str = "postgres") -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            return conn.execute(query, params or None).fetchall()


@contextlib.contextmanager
def pg15_server(
    prefix: str = "agentlab-sched-pg15-", *, listen: str = "127.0.0.1", **settings: str
) -> Iterator[PgServer]:
    """A fresh PostgreSQL 15 server listening on ``listen`` (addresses, comma-separated), stopped and
    removed on exit."""
    require_pg15()
    server = PgServer(owned_tempdir(prefix), free_port(), settings=dict(settings), listen=listen)
    try:
        server.initdb()
        server.start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(server.root, ignore_errors=True)


@contextlib.contextmanager
def standby_of(primary: PgServer) -> Iterator[PgServer]:
    """A streaming hot standby of ``primary``, made with pg_basebackup (-R: it follows the primary)."""
    standby = PgServer(owned_tempdir("agentlab-sched-standby-"), free_port())
    try:
        standby.sock.mkdir()
        user = server_user()
        if user is not None:
            shutil.chown(standby.sock, user, user)
        subprocess.run(
            as_user([str(PG15_BIN / "pg_basebackup"), "-D", str(standby.data), "-h", str(primary.sock),
                     "-p", str(primary.port), "-U", "postgres", "-X", "stream", "-R", "-c", "fast"]),
            check=True, stdout=subprocess.DEVNULL, timeout=START_TIMEOUT * 2,
        )  # fmt: skip
        standby.configure()  # its own port and socket; the primary's settings came with the copy
        standby.start()
        yield standby
    finally:
        standby.stop("immediate")
        shutil.rmtree(standby.root, ignore_errors=True)


def wait_replayed(primary: PgServer, standby: PgServer, timeout: float = 30.0) -> None:
    """Wait until ``standby`` has replayed everything ``primary`` wrote so far."""
    (lsn,) = primary.rows("SELECT pg_current_wal_lsn()::text")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (done,) = standby.rows("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", lsn)[0]
        if done:
            return
        time.sleep(0.05)
    raise AssertionError(f"the standby did not replay {lsn} within {timeout} s")


@dataclass
class PgBouncer:
    """PgBouncer in transaction pooling mode in front of one server (every database of it)."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    def url(self, dbname: str, *, user: str = "postgres") -> str:
        return conninfo.make_conninfo(host="127.0.0.1", port=self.port, dbname=dbname, user=user)

    @property
    def log(self) -> Path:
        return self.root / "pgbouncer.log"


#: The configuration the tests run PgBouncer with; docs/operations.md gives the same.
PGBOUNCER_INI = """\
[databases]
* = host={server_sock} port={server_port} connect_query='SET plan_cache_mode = force_custom_plan'

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir = {root}
auth_type = trust
auth_file = {root}/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = {pool_size}
ignore_startup_parameters = options
logfile = {root}/pgbouncer.log
pidfile = {root}/pgbouncer.pid
admin_users = postgres
"""


def missing_pgbouncer() -> str | None:
    if not PGBOUNCER.exists():
        return f"pgbouncer is not installed ({PGBOUNCER} is missing: apt-get install pgbouncer)"
    return None


@contextlib.contextmanager
def pgbouncer_for(server: PgServer, *, pool_size: int = 10) -> Iterator[PgBouncer]:
    """A PgBouncer (transaction pooling) in front of ``server``, run as the servers' user."""
    why = missing_pgbouncer()
    if why:
        pytest.skip(f"no PgBouncer here: {why}")
    root = owned_tempdir("agentlab-sched-pgbouncer-")
    port = free_port()
    (root / "users.txt").write_text('"postgres" ""\n')
    ini = root / "pgbouncer.ini"
    ini.write_text(
        PGBOUNCER_INI.format(
            server_sock=server.sock, server_port=server.port, port=port, root=root, pool_size=pool_size
        )
    )
    user = server_user()
    if user is not None:
        for path in (ini, root / "users.txt"):
            shutil.chown(path, user, user)
    process = subprocess.Popen(as_user([str(PGBOUNCER), str(ini)]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    bouncer = PgBouncer(root, port, process)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with psycopg.connect(bouncer.url("postgres"), autocommit=True, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if process.poll() is not None or time.monotonic() > deadline:
                    err = process.stderr.read().decode() if process.stderr and process.poll() is not None else ""
                    log = bouncer.log.read_text() if bouncer.log.exists() else ""
                    raise AssertionError(f"pgbouncer did not start: {err}{log}") from None
                time.sleep(0.1)
        yield bouncer
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: PgServer, template: str | None = None, *, name: str | None = None) -> str:
    """A new database on ``server`` (a copy of ``template`` when given); its name."""
    name = name or f"c_{os.getpid()}_{next(_counter)}"
    server.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return name


# --- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg15() -> Iterator[PgServer]:
    """The session's PostgreSQL 15 primary (wal_level replica: a standby can be made of it)."""
    with pg15_server() as server:
        yield server


@pytest.fixture(scope="session")
def pg15_template(pg15: PgServer) -> str:
    """A database on the primary migrated once, for tests to copy."""
    name = new_database(pg15, name=f"cluster_tpl_{os.getpid()}")
    migrate(pg15.url(name))
    return name


@pytest.fixture
def pg15_db(pg15: PgServer, pg15_template: str) -> Iterator[str]:
    """The name of a fresh migrated database on the primary, for this test alone."""
    name = new_database(pg15, pg15_template)
    yield name
    pg15.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg15_url(pg15: PgServer, pg15_db: str) -> str:
    """A direct URL (unix socket) of the test's fresh migrated database on the primary."""
    return pg15.url(pg15_db)


@pytest.fixture(scope="session")
def pgbouncer(pg15: PgServer) -> Iterator[PgBouncer]:
    """PgBouncer in transaction pooling mode in front of the session's primary."""
    with pgbouncer_for(pg15) as bouncer:
        yield bouncer


@pytest.fixture(scope="session")
def standby(pg15: PgServer) -> Iterator[PgServer]:
    """A streaming hot standby of the session's primary."""
    with standby_of(pg15) as server:
        yield server


def missing_citus() -> str | None:
    why = missing_pg15()
    if why:
        return why
    if not CITUS_LIB.exists():
        return f"Citus is not installed ({CITUS_LIB} is missing: scripts/install-citus SOURCE builds it)"
    return None


@dataclass
class CitusCluster:
    coordinator: PgServer
    workers: list[PgServer]


@contextlib.contextmanager
def citus_cluster(workers: int = 2, dbname: str = "sched") -> Iterator[CitusCluster]:
    """A Citus coordinator and ``workers`` workers, database ``dbname`` with the extension on each and the
    workers added to the coordinator."""
    why = missing_citus()
    if why:
        pytest.skip(f"no Citus here: {why}")
    servers: list[PgServer] = []
    with contextlib.ExitStack() as stack:
        for role in ["coordinator", *[f"worker{i}" for i in range(workers)]]:
            servers.append(
                stack.enter_context(
                    pg15_server(f"agentlab-sched-citus-{role}-", shared_preload_libraries="'citus'",
                                max_prepared_transactions="100")
                )
            )  # fmt: skip
        for server in servers:
            server.execute(f'CREATE DATABASE "{dbname}"')
            server.execute("CREATE EXTENSION citus", dbname=dbname)
        coordinator = servers[0]
        coordinator.execute(
            f"SELECT citus_set_coordinator_host('127.0.0.1', {coordinator.port})",
            *[f"SELECT citus_add_node('127.0.0.1', {w.port})" for w in servers[1:]],
            dbname=dbname,
        )
        yield CitusCluster(coordinator, servers[1:])


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """A Citus coordinator and two workers on this machine."""
    with citus_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def cluster_tools() -> Any:
    """This module's helpers, for test modules (which do not import each other or this conftest)."""
    import types

    return types.SimpleNamespace(
        pg15_server=pg15_server, standby_of=standby_of, wait_replayed=wait_replayed, pgbouncer_for=pgbouncer_for,
        new_database=new_database, free_port=free_port, as_user=as_user, server_user=server_user,
        citus_cluster=citus_cluster, with_db=with_db,
    )  # fmt: skip
