"""Fakes for the notification tests (no tests here).

- `FakePlatforms`: Feishu/Lark, WeCom and DingTalk as an httpx transport the tests route the platform
  hosts to. It answers with the platforms' real success and error bodies (HTTP 200 either way), checks
  signatures with its own HMAC code, and can be told to answer 429/5xx or throttle codes next.
- `LocalReceiver`: a real HTTP server on 127.0.0.1 for the generic format; it records requests, answers
  what it is told, and can hang.
- Helpers that write schedules, fires and runs straight into the test database.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
import pytest
from cryptography.fernet import Fernet
from psycopg.rows import DictRow

from agentlab_sched.notify import Sender
from agentlab_sched.settings import Settings

#: 09:00 in Asia/Shanghai.
T0 = datetime(2026, 10, 5, 1, 0, tzinfo=UTC)
KEY = Fernet.generate_key().decode()

FEISHU_TOKEN = "7d3c0f1e-5b2a-4c8e-9f10-feishu0token"
FEISHU_URL = f"https://open.feishu.cn/open-apis/bot/v2/hook/{FEISHU_TOKEN}"
FEISHU_SECRET = "kF3v9QmX2pLr8TzW"
LARK_URL = "https://open.larksuite.com/open-apis/bot/v2/hook/0b1c2d3e-lark0token"
WECOM_KEY = "693a91f6-7f3b-4bc4-97a0-0ec2sifa5aaa"
WECOM_URL = f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={WECOM_KEY}"
DINGTALK_TOKEN = "4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d"
DINGTALK_URL = f"https://oapi.dingtalk.com/robot/send?access_token={DINGTALK_TOKEN}"
DINGTALK_SECRET = "SEC1f0b6c2d9e8a7b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9"

FEISHU_OK = {"StatusCode": 0, "StatusMessage": "success", "code": 0, "data": {}, "msg": "success"}
FEISHU_BAD_TOKEN = {"code": 19001, "data": {}, "msg": "param invalid: incoming webhook access token invalid"}
FEISHU_BAD_SIGN = {
    "code": 19021,
    "data": {},
    "msg": "sign match fail or timestamp is not within one hour from current time",
}
FEISHU_KEYWORD = {"code": 19024, "data": {}, "msg": "Key Words Not Found"}
FEISHU_LIMITED = {"code": 11232, "data": {}, "msg": "frequency limited psm[lark.oapi.app_platform_runtime]"}
DINGTALK_OK = {"errcode": 0, "errmsg": "ok"}
DINGTALK_NO_TOKEN = {"errcode": 300001, "errmsg": "token is not exist"}
DINGTALK_BAD_SIGN = {
    "errcode": 310000,
    "errmsg": "sign not match, more: [https://ding-doc.dingtalk.com/doc#/serverapi2/qf2nxq]",
}
DINGTALK_TOO_FAST = {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}
WECOM_OK = {"errcode": 0, "errmsg": "ok"}
WECOM_BAD_KEY = {
    "errcode": 93000,
    "errmsg": "invalid webhook url, hint: [1759626000_4f2a], from ip: 101.36.0.1, more info at "
    "https://open.work.weixin.qq.com/devtool/query?e=93000",
}
WECOM_TOO_LONG = {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096. invalid Request Parameter"}
WECOM_LIMITED = {"errcode": 45009, "errmsg": "api freq out of limit, hint: [1759626000_77ab]"}

#: Public addresses for the platform hosts (the tests never leave the machine).
DNS = {
    "open.feishu.cn": ["101.36.0.10"],
    "open.larksuite.com": ["101.36.0.11"],
    "qyapi.weixin.qq.com": ["101.36.0.12"],
    "oapi.dingtalk.com": ["101.36.0.13"],
    "hooks.example.com": ["93.184.215.14"],
    "intranet.example.com": ["10.1.2.3"],
}


async def fake_dns(host: str, port: int) -> list[str]:
    if host in DNS:
        return DNS[host]
    raise OSError(f"[Errno -2] Name or service not known: {host}")


def settings(**changes: Any) -> Settings:
    """Settings with a key, English, private targets refused unless said."""
    base: dict[str, Any] = {"secret_keys": (KEY,), "locale": "en"}
    base.update(changes)
    return Settings(**base)


@dataclass
class Seen:
    host: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    raw: bytes
    #: the address the request was sent to
    address: str = ""

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


@dataclass
class FakePlatforms:
    """The three chat platforms, as they answer (HTTP 200 even when they refuse)."""

    now: datetime = T0
    #: bot token / key -> signing secret (None: not signed)
    bots: dict[str, str | None] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    #: host -> answers to give before the real logic (httpx.Response objects)
    scripted: dict[str, list[httpx.Response]] = field(default_factory=dict)

    def add(self, url: str, secret: str | None = None) -> None:
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        token = (query.get("key") or query.get("access_token") or [parts.path.rsplit("/", 1)[-1]])[0]
        self.bots[token] = secret

    def then(self, host: str, *answers: httpx.Response) -> None:
        self.scripted.setdefault(host, []).extend(answers)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def sender(self, timeout: float = 5.0) -> Sender:
        return Sender(timeout=timeout, transport=self.transport(), resolver=fake_dns)

    def to(self, host: str) -> list[Seen]:
        return [s for s in self.seen if s.host == host]

    def handle(self, request: httpx.Request) -> httpx.Response:
        raw = request.read()
        # The sender connects to the address it checked; the name travels in the Host header.
        seen = Seen(
            host=request.headers["host"].rsplit(":", 1)[0]
            if ":" in request.headers["host"]
            else request.headers["host"],
            address=request.url.host,
            path=request.url.path,
            query={k: v for k, v in request.url.params.items()},
            headers=dict(request.headers),
            raw=raw,
        )
        self.seen.append(seen)
        if self.scripted.get(seen.host):
            return self.scripted[seen.host].pop(0)
        if seen.host in ("open.feishu.cn", "open.larksuite.com"):
            return httpx.Response(200, json=self._feishu(seen))
        if seen.host == "qyapi.weixin.qq.com":
            return httpx.Response(200, json=self._wecom(seen))
        if seen.host == "oapi.dingtalk.com":
            return httpx.Response(200, json=self._dingtalk(seen))
        return httpx.Response(404, text="not found")

    def _within_hour(self, seconds: float) -> bool:
        return abs(seconds - self.now.timestamp()) <= 3600

    def _feishu(self, seen: Seen) -> dict:
        token = seen.path.removeprefix("/open-apis/bot/v2/hook/")
        if token not in self.bots:
            return FEISHU_BAD_TOKEN
        body = seen.json
        secret = self.bots[token]
        if secret is not None:
            ts, sign = body.get("timestamp"), body.get("sign")
            key = f"{ts}\n{secret}".encode()
            expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            if not ts or sign != expected or not self._within_hour(int(ts)):
                return FEISHU_BAD_SIGN
        if body.get("msg_type") != "interactive" or "card" not in body or len(seen.raw) > 20 * 1024:
            return {"code": 9499, "data": {}, "msg": "Bad Request"}
        return FEISHU_OK

    def _wecom(self, seen: Seen) -> dict:
        if seen.query.get("key") not in self.bots:
            return WECOM_BAD_KEY
        body = seen.json
        if body.get("msgtype") != "markdown":
            return {"errcode": 40008, "errmsg": "invalid message type"}
        if len(body["markdown"]["content"].encode()) > 4096:
            return WECOM_TOO_LONG
        return WECOM_OK

    def _dingtalk(self, seen: Seen) -> dict:
        token = seen.query.get("access_token")
        if token not in self.bots:
            return DINGTALK_NO_TOKEN
        secret = self.bots[token]
        if secret is not None:
            ts, sign = seen.query.get("timestamp", ""), seen.query.get("sign", "")
            digest = hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
            if not ts.isdigit() or sign != base64.b64encode(digest).decode() or not self._within_hour(int(ts) / 1000):
                return DINGTALK_BAD_SIGN
        body = seen.json
        if body.get("msgtype") != "markdown" or not body["markdown"].get("title"):
            return {"errcode": 400105, "errmsg": "不支持的消息类型"}
        return DINGTALK_OK


@dataclass
class LocalReceiver:
    """A generic webhook receiver: a real HTTP server on 127.0.0.1."""

    requests: list[Seen] = field(default_factory=list)
    #: (status, body) answers to give in order; then 200 {"ok": true}
    answers: list[tuple[int, bytes]] = field(default_factory=list)
    hang: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None, "the receiver is not started"
        return self.server.server_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/agentlab"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                parts = urlsplit(self.path)
                receiver.requests.append(
                    Seen(self.headers.get("Host", ""), parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()},
                         {k.lower(): v for k, v in self.headers.items()}, raw, self.client_address[0])
                )  # fmt: skip
                receiver.arrived.set()
                if receiver.hang:
                    receiver.release.wait(30)
                    return
                status, body = receiver.answers.pop(0) if receiver.answers else (200, b'{"ok": true}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[LocalReceiver]:
    server = LocalReceiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def add_schedule(
    conn: psycopg.AsyncConnection[DictRow],
    name: str = "daily-report",
    *,
    timezone: str = "Asia/Shanghai",
    run_timeout: timedelta | None = None,
) -> int:
    cur = await conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, timeout)
           VALUES (%s, '0 9 * * *', 'demo.echo', %s, %s) RETURNING id""",
        (name, timezone, run_timeout),
    )
    row = await cur.fetchone()
    assert row is not None
    return row["id"]


async def add_run(
    conn: psycopg.AsyncConnection[DictRow],
    schedule_id: int,
    *,
    status: str = "running",
    kind: str = "scheduled",
    fire_at: datetime = T0,
    started_at: datetime | None = T0 + timedelta(seconds=2),
) -> str:
    """A fire of ``kind`` at ``fire_at`` and its run (the engine's rows, written by hand)."""
    cur = await conn.execute(
        """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status)
           VALUES (%s, %s, %s, 'started') RETURNING id""",
        (schedule_id, fire_at, kind),
    )
    fire = await cur.fetchone()
    assert fire is not None
    cur = await conn.execute(
        """INSERT INTO agentlab_sched.runs (schedule_id, fire_id, task, started_by, status, started_at)
           VALUES (%s, %s, 'demo.echo', 'schedule:test', %s, %s) RETURNING id::text""",
        (schedule_id, fire["id"], status, started_at),
    )
    run = await cur.fetchone()
    assert run is not None
    await conn.execute("UPDATE agentlab_sched.fires SET run_id = %s WHERE id = %s", (run["id"], fire["id"]))
    return run["id"]


async def set_status(conn: psycopg.AsyncConnection[DictRow], run_id: str, status: str, **columns: Any) -> None:
    """Change a run's status (and other columns) as the engine would."""
    sets = ", ".join(f"{name} = %s" for name in ["status", *columns])
    await conn.execute(f"UPDATE agentlab_sched.runs SET {sets} WHERE id = %s", (status, *columns.values(), run_id))


async def outbox(conn: psycopg.AsyncConnection[DictRow]) -> list[DictRow]:
    cur = await conn.execute(
        "SELECT id, run_id::text AS run_id, event, segment, status, attempts, payload, last_error, "
        "next_attempt_at FROM agentlab_sched.outbox ORDER BY id"
    )
    return await cur.fetchall()


async def deliveries(conn: psycopg.AsyncConnection[DictRow]) -> list[DictRow]:
    cur = await conn.execute("SELECT * FROM agentlab_sched.deliveries ORDER BY id")
    return await cur.fetchall()
