"""What every response carries and every post must show: security headers, the CSRF token, the origin."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SecurityHeaders", "csrf_token", "same_origin", "valid_csrf"]

#: No inline script, no inline style, nothing from elsewhere; forms post only here; no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class SecurityHeaders:
    """ASGI middleware: the headers above on every HTTP response (streams too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def csrf_token(session: MutableMapping[str, Any]) -> str:
    """The session's CSRF token (made on first use): every form posts it back."""
    token = session.get("csrf")
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


def valid_csrf(session: MutableMapping[str, Any], posted: object) -> bool:
    """Whether the posted token is the session's."""
    expected = session.get("csrf")
    return isinstance(posted, str) and isinstance(expected, str) and hmac.compare_digest(posted, expected)


def same_origin(request: Request) -> bool:
    """Whether a post comes from these pages: its Origin (else its Referer) names this host; a browser's
    ``Sec-Fetch-Site`` must not say cross-site. A client that sends none of them (a script) passes here and
    still needs the CSRF token."""
    host = request.headers.get("host", "")
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer")
        if referer is None:
            return True
        origin = "/".join(referer.split("/", 3)[:3])
    if origin == "null":
        return False
    return origin.split("://", 1)[-1] == host
