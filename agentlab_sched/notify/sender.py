"""One HTTP attempt: the host resolved once and checked, the request sent to that very address (Host
header and TLS server name kept as the name), one deadline for the whole attempt, redirects never
followed, a reply read and decoded up to a cap, nothing secret logged.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import zlib

import httpx

from agentlab_sched.errors import ValidationError
from agentlab_sched.notify.platforms import Prepared, Verdict, judge
from agentlab_sched.notify.secrets import mask_url
from agentlab_sched.notify.urls import Resolver, resolve_destination, system_resolver

#: Seconds for one attempt, all of it (resolve, connect, write, every read): a hanging or trickling
#: receiver costs at most this (the dispatcher's lease is longer).
DEFAULT_TIMEOUT = 10.0
#: Bytes of an answer kept for judging and recording (read, and decoded, at most this much).
MAX_ANSWER = 65_536
#: zlib's window bits for the one Content-Encoding decoded (gzip, or deflate with its zlib header).
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def decode_answer(raw: bytes, content_encoding: str | None) -> bytes:
    """At most :data:`MAX_ANSWER` bytes of an answer's body: ``raw`` (itself at most that) decoded when it
    has one gzip or deflate encoding, bounded, so that a small compressed reply never becomes a large one;
    a chain of encodings (``gzip, gzip``) or another one is kept as it came."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if len(codings) != 1 or codings[0] not in _WBITS:
        return raw[:MAX_ANSWER]
    for wbits in (_WBITS[codings[0]], -zlib.MAX_WBITS):  # deflate is sometimes sent without its header
        try:
            return zlib.decompressobj(wbits).decompress(raw, MAX_ANSWER)
        except zlib.error:
            continue
    return raw[:MAX_ANSWER]


_URL = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)


def hide_urls(text: str) -> str:
    """``text`` with every URL in it masked to its scheme and host (a webhook URL is a credential)."""
    return _URL.sub(lambda m: mask_url(m.group(0)), text)


class _NoUrls(logging.Filter):
    """Masks URLs in the records of the HTTP libraries (httpx logs ``POST <full URL>`` at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(hide_urls(str(a)) if isinstance(a, httpx.URL | str) else a for a in args)
        if isinstance(record.msg, str) and "://" in record.msg:
            record.msg = hide_urls(record.msg)
        return True


_FILTER = _NoUrls()
for _name in ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy"):
    _logger = logging.getLogger(_name)
    if not any(isinstance(f, _NoUrls) for f in _logger.filters):
        _logger.addFilter(_FILTER)


def _host_header(url: httpx.URL, scheme: str) -> str:
    host = url.raw_host.decode("ascii")
    netloc = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return netloc if url.port in (None, default) else f"{netloc}:{url.port}"


class Sender:
    """Sends prepared requests; reusable, close it with `aclose` (or use ``async with``).

    ``transport`` and ``resolver`` are for tests (fake platforms, fake DNS). Proxies from the environment
    are not used: a proxy would resolve the name again itself.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.timeout = timeout
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            transport=transport,
            trust_env=False,
            # No connection is reused: one opened (and verified) for one name never carries a request
            # for another name that resolved to the same address.
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._resolver = resolver or system_resolver

    async def __aenter__(self) -> Sender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def send(self, request: Prepared, platform: str, *, allow_private: bool) -> Verdict:
        """Send ``request`` once and judge the answer by ``platform``'s rules (the host's platform), within
        one deadline of ``timeout`` seconds for the whole attempt.

        Never raises for the receiver's or the network's faults: they become a `Verdict`.
        """
        try:
            async with asyncio.timeout(self.timeout):
                return await self._send(request, platform, allow_private=allow_private)
        except TimeoutError:
            return self._timed_out(request.url)

    def _timed_out(self, url: str) -> Verdict:
        try:
            host = httpx.URL(url).raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeError):
            host = ""
        return Verdict(
            "retry", problem="notify.problem.timeout", problem_params={"host": host, "seconds": f"{self.timeout:g}"}
        )

    async def _send(self, request: Prepared, platform: str, *, allow_private: bool) -> Verdict:
        host = ""
        try:
            url = httpx.URL(request.url)
            host = url.raw_host.decode("ascii")
            scheme = url.scheme
            port = url.port or (443 if scheme == "https" else 80)
            addresses = await resolve_destination(host, port, allow_private=allow_private, resolver=self._resolver)
        except ValidationError as exc:
            return Verdict("failed", problem=exc.code, problem_params=exc.params)
        except (httpx.InvalidURL, UnicodeError) as exc:
            return Verdict("failed", problem="notify.problem.bad_url", problem_params={"detail": hide_urls(str(exc))})
        except OSError as exc:
            return Verdict(
                "retry",
                problem="notify.problem.dns",
                problem_params={"host": host, "detail": hide_urls(str(exc)) or type(exc).__name__},
            )
        address = addresses[0]
        # identity asked for: a receiver that compresses anyway is decoded only up to the cap (decode_answer)
        headers = {**request.headers, "Host": _host_header(url, scheme), "Accept-Encoding": "identity"}
        extensions = {}
        if scheme == "https" and not _is_ip(host):
            extensions["sni_hostname"] = host  # TLS: the name, not the address, is checked
        target = url.copy_with(host=str(address))
        try:
            async with self._client.stream(
                "POST", target, content=request.body, headers=headers, extensions=extensions
            ) as answer:
                raw = b""
                try:
                    async for chunk in answer.aiter_raw():  # as sent: httpx would decode all of it first
                        raw += chunk
                        if len(raw) >= MAX_ANSWER:
                            break
                except httpx.StreamConsumed:  # a transport that gave the body in memory (httpx.MockTransport)
                    raw = answer.content[:MAX_ANSWER]
        except httpx.TimeoutException:
            return self._timed_out(request.url)
        except httpx.TransportError as exc:
            return Verdict(
                "retry",
                problem="notify.problem.network",
                problem_params={"host": host, "detail": hide_urls(str(exc)) or type(exc).__name__},
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # the URL itself is unusable
            return Verdict("failed", problem="notify.problem.bad_url", problem_params={"detail": hide_urls(str(exc))})
        body = decode_answer(raw[:MAX_ANSWER], answer.headers.get("content-encoding"))
        return judge(platform, answer.status_code, answer.headers, body)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
