"""Metrics are served on the loopback unless the operator chooses an address (--metrics-host): they name
schedules and tasks."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.demo import make_app
from agentlab_sched.observe.metrics import Metrics
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import run_worker


def _other_address() -> str | None:
    """An address of this machine that is not the loopback, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: the kernel picks the outgoing address
            found = s.getsockname()[0]
    except OSError:
        return None
    return None if found.startswith("127.") else found


def test_metrics_listen_on_the_loopback_by_default(db_url: str) -> None:
    metrics = Metrics(db_url)
    port = metrics.serve(0)
    try:
        assert metrics._server is not None and metrics._server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert answer.status == 200
        other = _other_address()
        if other is not None:  # not reachable from another interface
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((other, port)) != 0
    finally:
        metrics.stop()


async def test_a_worker_serves_metrics_on_the_host_it_is_given(db_url: str) -> None:
    stop = asyncio.Event()
    seen: list[int] = []
    worker = asyncio.create_task(
        run_worker(make_app(db_url), db_url, stop=stop, install_signal_handlers=False, metrics_port=0,
                   metrics_host="127.0.0.2", settings=Settings(locale="en", scheduler=False))
    )  # fmt: skip
    try:
        for _ in range(200):
            found = _listening("127.0.0.2")
            if found:
                seen.extend(found)
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=15)
    assert seen, "no metrics listener on 127.0.0.2"


def _listening(host: str) -> list[int]:
    """Ports listening on ``host`` (from /proc/net/tcp)."""
    want = "".join(f"{int(part):02X}" for part in reversed(host.split(".")))
    ports = []
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if address == want and state == "0A":
                ports.append(int(port, 16))
    return ports


def test_the_cli_has_metrics_host() -> None:
    result = CliRunner().invoke(app, ["worker", "--help"], env={"COLUMNS": "200"})
    assert "--metrics-host" in result.output
