"""Webhook URL validation: when a URL is saved, and again (after DNS) when a message is sent.

The platform of a webhook is decided by its host, never by the format a user picked: a Feishu URL
saved with the generic format would judge a refused delivery (HTTP 200, ``code != 0``) as success.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna

from agentlab_sched.errors import ValidationError
from agentlab_sched.messages import term

FORMATS = ("generic", "feishu", "wecom", "dingtalk")

#: Bot hosts of the chat platforms -> the format (and the success rules) they need.
PLATFORM_HOSTS: dict[str, str] = {
    "open.feishu.cn": "feishu",
    "open.larksuite.com": "feishu",
    "qyapi.weixin.qq.com": "wecom",
    "oapi.dingtalk.com": "dingtalk",
}

#: A resolver: (host, port) -> the IP addresses it resolves to.
Resolver = Callable[[str, int], Awaitable[list[str]]]

_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")


@dataclass(frozen=True)
class WebhookUrl:
    """A URL that passed validation, with what was learned about it."""

    url: str
    format: str
    #: the host as IDNA ASCII, lower case (IPv6 without brackets)
    host: str
    port: int
    #: the platform the host belongs to (``generic`` for any other host)
    platform: str


def platform_of(host: str) -> str:
    """``feishu``, ``wecom``, ``dingtalk`` for the platforms' bot hosts, ``generic`` for any other."""
    return PLATFORM_HOSTS.get(host.lower().rstrip("."), "generic")


def platform_hosts(platform: str) -> list[str]:
    """The bot hosts of one platform."""
    return [h for h, p in PLATFORM_HOSTS.items() if p == platform]


def check_text(value: str, field: str) -> None:
    """Refuse whitespace, control and invisible characters (zero-width space, BOM, bidi marks ...)."""
    for position, char in enumerate(value, start=1):
        category = unicodedata.category(char)
        if char.isspace() or category[0] in ("C", "Z"):
            name = unicodedata.name(char, "")
            label = f"U+{ord(char):04X} {name}".strip()
            raise ValidationError(
                "notify.text.bad_char",
                field,
                field=term(f"notify.field.{field}"),
                char=label,
                position=position,
            )


def validate_url(url: object, format: str | None = None, *, allow_private: bool = False) -> WebhookUrl:
    """Check a webhook URL as it is saved; ``format`` None infers it from the host.

    Raises `ValidationError` naming ``webhook_url`` or ``webhook_format``.
    """
    if format is not None and format not in FORMATS:
        raise ValidationError("notify.format.unknown", "webhook_format", value=str(format), choices=list(FORMATS))
    if not isinstance(url, str) or not url.strip():
        raise ValidationError("notify.url.empty", "webhook_url")
    url = url.strip()
    check_text(url, "webhook_url")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not url.lower().startswith(scheme + "://"):
        raise ValidationError("notify.url.scheme", "webhook_url", scheme=parts.scheme or None)
    netloc = parts.netloc.rpartition("@")[2]
    host_part, port_text = _split_host_port(netloc)
    if not host_part:
        raise ValidationError("notify.url.no_host", "webhook_url")
    host = _ascii_host(host_part)
    port = _port(port_text, scheme)
    platform = platform_of(host)
    if platform != "generic":
        if scheme != "https":
            raise ValidationError(
                "notify.url.https_required",
                "webhook_url",
                host=host,
                platform=term(f"notify.platform.{platform}"),
            )
        if format is None:
            format = platform
        elif format != platform:
            raise ValidationError(
                "notify.format.mismatch",
                "webhook_format",
                host=host,
                platform=term(f"notify.platform.{platform}"),
                expected=platform,
                format=format,
            )
    elif format is None:
        format = "generic"
    elif format != "generic":
        raise ValidationError(
            "notify.format.needs_platform_host",
            "webhook_format",
            format=format,
            platform=term(f"notify.platform.{format}"),
            hosts=platform_hosts(format),
            host=host,
        )
    if not allow_private:
        _refuse_private_name(host)
        address = _ip(host)
        if address is not None:
            refuse_address(host, address)
    return WebhookUrl(url=url, format=format, host=host, port=port, platform=platform)


def _split_host_port(netloc: str) -> tuple[str, str | None]:
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            raise ValidationError("notify.url.no_host", "webhook_url")
        rest = netloc[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValidationError("notify.url.port", "webhook_url", port=rest)
        return netloc[1:end], (rest[1:] if rest else None)
    host, sep, port = netloc.rpartition(":")
    if not sep:
        return netloc, None
    return host, port


def _port(text: str | None, scheme: str) -> int:
    if text is None:
        return 443 if scheme == "https" else 80
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValidationError("notify.url.port", "webhook_url", port=text or None)
    return int(text)


def _ascii_host(raw: str) -> str:
    """The host in IDNA ASCII, lower case; an IP literal as written."""
    if _ip(raw) is not None:
        return raw.lower()
    host = raw.rstrip(".")
    try:
        ascii_host = host.encode("ascii").decode().lower() if host.isascii() else idna.encode(host, uts46=True).decode()
    except (idna.IDNAError, UnicodeError) as exc:
        raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason=str(exc)) from None
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason=_label_reason(labels))
    for label in labels:
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError) as exc:
                raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason=str(exc)) from None
    return ascii_host


def _label_reason(labels: list[str]) -> str:
    for label in labels:
        if not label:
            return "empty label"
        if len(label) > 63:
            return f"label longer than 63 characters: {label[:20]}..."
        if label.startswith("-") or label.endswith("-"):
            return f"label starts or ends with a hyphen: {label}"
        if not _LABEL.match(label):
            return f"label has characters other than letters, digits and hyphens: {label}"
    return "longer than 253 characters"


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def address_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """``loopback``, ``link_local``, ``private`` or ``reserved`` for a non-public address, else None."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link_local"
    if address.is_private or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED):
        return "private"
    if not address.is_global or address.is_multicast or address.is_unspecified or address.is_reserved:
        return "reserved"
    return None


_SHARED = ipaddress.ip_network("100.64.0.0/10")


def refuse_address(host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    """Raise when ``address`` is not a public one."""
    kind = address_kind(address)
    if kind is not None:
        raise ValidationError(
            "notify.url.private",
            "webhook_url",
            host=host,
            address=str(address),
            kind=term(f"notify.address.{kind}"),
        )


def _refuse_private_name(host: str) -> None:
    if host == "localhost" or host.endswith(".localhost"):
        raise ValidationError(
            "notify.url.private", "webhook_url", host=host, address=host, kind=term("notify.address.loopback")
        )


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for ``host``."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


async def check_destination(host: str, port: int, *, allow_private: bool, resolver: Resolver) -> None:
    """At send time: refuse a host that resolves to any private, loopback or link-local address.

    Raises `ValidationError` (a configuration error); a resolver failure (``OSError``) propagates, the
    caller treats it as a network error worth retrying.
    """
    if allow_private:
        return
    _refuse_private_name(host)
    literal = _ip(host)
    addresses = [str(literal)] if literal is not None else await resolver(host, port)
    for text in addresses:
        refuse_address(host, ipaddress.ip_address(text.split("%", 1)[0]))
