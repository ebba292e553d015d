"""Worker "hosts" on this machine: network namespaces made with ``ip netns``, each with an address of its
own on a veth pair whose other end is on a bridge in the database's (the root) namespace, and a host
name of its own (a UTS namespace, ``unshare --uts``). Used by bench/hosts.py and tests/cluster.

Addresses are in 198.18.0.0/15, the range set aside for benchmarking network devices: the bridge (where
PostgreSQL listens) is 198.18.0.1, host ``i`` is 198.18.1.i. Nothing leaves the machine.

:meth:`Hosts.vanish` makes a host disappear as a machine that loses power or its network does: its veth
pair is deleted first (so nothing it sends afterwards, FIN or RST, reaches the database), then every
process in it is killed with SIGKILL and the namespace deleted.

Making namespaces needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and ``ip``; where they cannot be made,
``Hosts(..., namespaces=False)`` or `Hosts.possible()` is False and the hosts are plain processes on
127.0.0.1, saying so (`Hosts.why_not`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

SERVER_ADDRESS = "198.18.0.1"
NETWORK = "198.18.0.0/15"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=20)


def why_no_namespaces() -> str | None:
    """Why network namespaces cannot be made here (None: they can)."""
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "the ip and unshare commands are missing (iproute2, util-linux)"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    name = f"agentlab-probe-{os.getpid()}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip() or made.returncode}"
    _ip("netns", "del", name, check=False)
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True, text=True, timeout=10)
    if probe.returncode != 0:
        return f"unshare --uts failed: {probe.stderr.strip()}"
    return None


@dataclass
class Host:
    """One worker host: its name (also its host name), namespace, address and processes."""

    index: int
    name: str
    namespace: str | None
    address: str
    veth: str | None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    gone: bool = False


class Hosts:
    """``count`` hosts; a context manager that removes everything it made."""

    def __init__(self, count: int, *, namespaces: bool = True, prefix: str | None = None) -> None:
        self.tag = prefix or f"ag{os.getpid() % 100000}"
        self.why_not = why_no_namespaces() if namespaces else "asked for plain processes"
        self.namespaced = self.why_not is None
        self.bridge = f"{self.tag}br" if self.namespaced else None
        self.server_address = SERVER_ADDRESS if self.namespaced else "127.0.0.1"
        self.hosts: list[Host] = []
        self._count = count

    def __enter__(self) -> Hosts:
        try:
            if self.namespaced:
                assert self.bridge is not None
                _ip("link", "add", self.bridge, "type", "bridge")
                _ip("addr", "add", f"{SERVER_ADDRESS}/15", "dev", self.bridge)
                _ip("link", "set", self.bridge, "up")
            for _ in range(self._count):
                self.add()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self) -> Host:
        """One more host (its namespace and link made now)."""
        i = len(self.hosts) + 1
        name = f"host-{i}"
        if not self.namespaced:
            host = Host(i, name, None, "127.0.0.1", None)
        else:
            namespace, veth, inner = f"agentlab-{self.tag}-h{i}", f"{self.tag}v{i}", f"{self.tag}i{i}"
            address = f"198.18.1.{i}"
            _ip("netns", "add", namespace)
            _ip("link", "add", veth, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", namespace)
            assert self.bridge is not None
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", namespace, "addr", "add", f"{address}/15", "dev", inner)
            _ip("-n", namespace, "link", "set", inner, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            host = Host(i, name, namespace, address, veth)
        self.hosts.append(host)
        return host

    def command(self, host: Host, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on ``host``: in its namespace, with its host name."""
        if host.namespace is None:
            return list(argv)
        return ["ip", "netns", "exec", host.namespace, "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', host.name, *argv]  # fmt: skip

    def start(self, host: Host, argv: Sequence[str], **popen: object) -> subprocess.Popen[bytes]:
        """Start ``argv`` on ``host`` (``popen``: subprocess.Popen's keywords)."""
        proc: subprocess.Popen[bytes] = subprocess.Popen(self.command(host, argv), **popen)  # type: ignore[call-overload]
        host.processes.append(proc)
        return proc

    def pids(self, host: Host) -> list[int]:
        """Every process in ``host``'s namespace (or the ones started there, without namespaces)."""
        if host.namespace is None:
            return [p.pid for p in host.processes if p.poll() is None]
        out = _ip("netns", "pids", host.namespace, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]

    def vanish(self, host: Host) -> None:
        """The host disappears: its link first (no FIN, no RST reaches the database), then its processes
        (SIGKILL) and its namespace. Without namespaces its processes are killed (the kernel then closes
        their connections: a crash, not a vanished host)."""
        if host.veth is not None:
            _ip("link", "del", host.veth, check=False)
        for pid in self.pids(host):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in host.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        if host.namespace is not None:
            _ip("netns", "del", host.namespace, check=False)
        host.gone = True

    def stop(self, host: Host, timeout: float = 10.0) -> list[float]:
        """SIGTERM the processes started on ``host``; the seconds each took to exit (killed after ``timeout``)."""
        began = time.monotonic()
        for proc in host.processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        took = []
        for proc in host.processes:
            try:
                proc.wait(max(0.1, began + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            took.append(time.monotonic() - began)
        return took

    def close(self) -> None:
        for host in self.hosts:
            if not host.gone:
                self.stop(host)
                self.vanish(host)
        if self.bridge is not None:
            _ip("link", "del", self.bridge, check=False)
