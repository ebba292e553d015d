"""One HTTP attempt: destination re-checked after DNS, httpx with a timeout, redirects never followed."""

from __future__ import annotations

import httpx

from agentlab_sched.errors import ValidationError
from agentlab_sched.notify.platforms import Prepared, Verdict, judge
from agentlab_sched.notify.secrets import mask_url
from agentlab_sched.notify.urls import Resolver, check_destination, system_resolver

#: Seconds for one attempt (connect, write, read): a hanging receiver costs at most this.
DEFAULT_TIMEOUT = 10.0
#: Bytes of an answer kept for judging and recording.
MAX_ANSWER = 65_536


def _hide(text: str, url: str) -> str:
    """An error text with the URL (a credential) masked."""
    return text.replace(url, mask_url(url)) if url else text


class Sender:
    """Sends prepared requests; reusable, close it with `aclose` (or use ``async with``).

    ``transport`` and ``resolver`` are for tests (fake platforms, fake DNS).
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
            trust_env=transport is None,
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
        """Send ``request`` once and judge the answer by ``platform``'s rules (the host's platform).

        Never raises for the receiver's or the network's faults: they become a `Verdict`.
        """
        try:
            url = httpx.URL(request.url)
            host = url.raw_host.decode("ascii")
            port = url.port or (443 if url.scheme == "https" else 80)
            await check_destination(host, port, allow_private=allow_private, resolver=self._resolver)
        except ValidationError as exc:
            return Verdict("failed", problem=exc.code, problem_params=exc.params)
        except (httpx.InvalidURL, UnicodeError) as exc:
            return Verdict(
                "failed", problem="notify.problem.bad_url", problem_params={"detail": _hide(str(exc), request.url)}
            )
        except OSError as exc:
            return Verdict(
                "retry",
                problem="notify.problem.dns",
                problem_params={"host": host, "detail": _hide(str(exc), request.url) or type(exc).__name__},
            )
        try:
            async with self._client.stream("POST", url, content=request.body, headers=request.headers) as answer:
                body = b""
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) >= MAX_ANSWER:
                        break
        except httpx.TimeoutException:
            return Verdict(
                "retry",
                problem="notify.problem.timeout",
                problem_params={"host": host, "seconds": f"{self.timeout:g}"},
            )
        except httpx.TransportError as exc:
            return Verdict(
                "retry",
                problem="notify.problem.network",
                problem_params={"host": host, "detail": _hide(str(exc), request.url) or type(exc).__name__},
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # the URL itself is unusable
            return Verdict(
                "failed", problem="notify.problem.bad_url", problem_params={"detail": _hide(str(exc), request.url)}
            )
        return judge(platform, answer.status_code, answer.headers, body[:MAX_ANSWER])
