"""A webhook receiver cannot hold or flood a worker: one deadline for the whole send (a reply trickled a byte
at a time ends at it), and a compressed reply is decoded at most to the 64 KiB cap."""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentlab_sched.notify import Sender
from agentlab_sched.notify.platforms import Prepared
from agentlab_sched.notify.sender import MAX_ANSWER, decode_answer
from tests.support.timing import Slowdown

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """Start a local HTTP receiver with the given handler; its URL."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"

    yield start
    for server in servers:
        server.close()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    await reader.readexactly(length)
    return head


def _post(url: str) -> Prepared:
    return Prepared(url, {"Content-Type": "application/json"}, b'{"text": "hello"}')


async def test_a_trickling_receiver_is_cut_off_at_one_deadline_for_the_whole_send(serve: Callable) -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n")
        try:
            for _ in range(100):  # a byte every 0.2 s: each read is well within the timeout
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(0.2)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    url = await serve(trickle)
    with Slowdown() as slowdown:
        started = time.monotonic()
        async with Sender(timeout=1.0) as sender:
            verdict = await sender.send(_post(url), "generic", allow_private=True)
        took = time.monotonic() - started
    assert (verdict.outcome, verdict.problem, verdict.problem_params) == (
        "retry",
        "notify.problem.timeout",
        {"host": "127.0.0.1", "seconds": "1"},
    )
    assert 0.9 < took < slowdown.bound(2.0), (took, str(slowdown))  # a busy machine: tests/support/timing.py


async def test_a_compressed_reply_is_never_decoded_past_the_cap(serve: Callable) -> None:
    bomb = gzip.compress(b"\0" * (32 * 1024 * 1024), compresslevel=9)  # 32 KiB that are 32 MiB
    chain = gzip.compress(gzip.compress(gzip.compress(b"\0" * (8 * 1024 * 1024))))
    asked: list[bytes] = []

    def answering(body: bytes, encoding: str) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            asked.append(await _read_request(reader))
            writer.write(
                f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: {encoding}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            writer.close()

        return handler

    for body, encoding in ((bomb, "gzip"), (chain, "gzip, gzip, gzip")):
        url = await serve(answering(body, encoding))
        tracemalloc.start()
        try:
            async with Sender(timeout=5.0) as sender:
                verdict = await sender.send(_post(url), "generic", allow_private=True)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert verdict.outcome == "sent", (encoding, verdict)
        assert peak < 4 * 1024 * 1024, (encoding, peak)  # the reply never grew past a few times the cap
    assert all(b"accept-encoding: identity" in head.lower() for head in asked)
    assert decode_answer(bomb[:MAX_ANSWER], "gzip") == b"\0" * MAX_ANSWER
    assert decode_answer(b"plain", "br") == b"plain"
