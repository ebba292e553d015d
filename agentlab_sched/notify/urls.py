"""Webhook URLs: one normal form, validation when a URL is saved, and the destination check at send time.

Every URL is brought to one normal form (`normalise`) before anything is judged from it: the scheme and
host in lower case, the host in IDNA ASCII (ideographic full stops 。．｡ read as dots, no trailing dot),
legacy numeric IPv4 spellings (``127.1``, ``0x7f.1``, ``2130706433``) as the dotted address they
reach, the default port left out, percent-escapes of unreserved characters decoded, no fragment. The
platform of a webhook (and so the rules its answers are judged by) and the identity of its bot (the
rate-limit key) are decided from that form, never from the spelling a user typed.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import re
import socket
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

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

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
#: Full stops a domain name may be typed with (UTS 46): ASCII, ideographic, full-width, half-width.
_DOTS = re.compile("[.\u3002\uff0e\uff61]")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class WebhookUrl:
    """A URL that passed validation, in its normal form, with what was learned about it."""

    #: the normal form: what is stored, sent, and judged by
    url: str
    format: str
    #: the host as IDNA ASCII, lower case (IPv6 without brackets)
    host: str
    port: int
    #: the platform the host belongs to (``generic`` for any other host)
    platform: str

    @property
    def display_host(self) -> str:
        """The host as people should see it: an IDN in punycode beside its Unicode form."""
        return display_host(self.host)


@dataclass(frozen=True)
class NormalUrl:
    """A URL in its normal form, split into what the checks need."""

    url: str
    scheme: str
    host: str
    port: int
    #: the address when the host is an IP literal
    address: IPAddress | None

    @property
    def platform(self) -> str:
        return platform_of(self.host)

    @property
    def bot(self) -> str:
        """Names the bot without revealing its URL: the platform and a hash of what identifies the bot.

        For the chat platforms that is the host and the bot's token (Feishu's path, WeCom's ``key``,
        DingTalk's ``access_token``), so that no spelling of one bot escapes its rate limit; for other
        receivers, the whole normal URL.
        """
        parts = urlsplit(self.url)
        token: str | None = None
        if self.platform == "feishu":
            token = parts.path.rstrip("/").rpartition("/")[2] or None
        elif self.platform in ("wecom", "dingtalk"):
            name = "key" if self.platform == "wecom" else "access_token"
            token = next((v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k == name), None)
        identity = f"{self.host}\n{token}" if token else self.url
        return f"{self.platform}:{hashlib.sha256(identity.encode('utf-8')).hexdigest()[:24]}"


def platform_of(host: str) -> str:
    """``feishu``, ``wecom``, ``dingtalk`` for the platforms' bot hosts, ``generic`` for any other.

    ``host`` may be spelled any way a user types it (case, ideographic dots, a trailing dot, IDNA).
    """
    try:
        return PLATFORM_HOSTS.get(_ascii_host(host), "generic")
    except ValidationError:
        return "generic"


def platform_hosts(platform: str) -> list[str]:
    """The bot hosts of one platform."""
    return [h for h, p in PLATFORM_HOSTS.items() if p == platform]


def display_host(host: str) -> str:
    """``xn--pple-43d.com (аpple.com)`` for an internationalised name, the host itself otherwise."""
    if not any(label.startswith("xn--") for label in host.split(".")):
        return host
    try:
        return f"{host} ({idna.decode(host)})"
    except (idna.IDNAError, UnicodeError):
        return host


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


def normalise(url: object) -> NormalUrl:
    """The normal form of a webhook URL (see the module's docstring); `ValidationError` naming
    ``webhook_url`` when it is not a usable http(s) URL."""
    if not isinstance(url, str) or not url.strip():
        raise ValidationError("notify.url.empty", "webhook_url")
    url = url.strip()
    check_text(url, "webhook_url")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not url.lower().startswith(scheme + "://"):
        raise ValidationError("notify.url.scheme", "webhook_url", scheme=parts.scheme or None)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    host_part, port_text = _split_host_port(hostport)
    if not host_part:
        raise ValidationError("notify.url.no_host", "webhook_url")
    host = _ascii_host(host_part)
    address = _ip(host)
    port = _port(port_text, scheme)
    netloc = f"[{host}]" if isinstance(address, ipaddress.IPv6Address) else host
    if port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    if at:
        netloc = f"{_unescape(userinfo)}@{netloc}"
    normal = f"{scheme}://{netloc}{_unescape(parts.path) or '/'}"
    if parts.query:
        normal += "?" + _unescape(parts.query)
    return NormalUrl(normal, scheme, host, port, address)


def validate_url(url: object, format: str | None = None, *, allow_private: bool = False) -> WebhookUrl:
    """Check a webhook URL as it is saved; ``format`` None infers it from the host.

    The result's ``url`` is the normal form. Raises `ValidationError` naming ``webhook_url`` or
    ``webhook_format``.
    """
    if format is not None and format not in FORMATS:
        raise ValidationError("notify.format.unknown", "webhook_format", value=str(format), choices=list(FORMATS))
    normal = normalise(url)
    host, platform = normal.host, normal.platform
    if platform != "generic":
        if normal.scheme != "https":
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
        if normal.address is not None:
            refuse_address(host, normal.address)
    return WebhookUrl(url=normal.url, format=format, host=host, port=normal.port, platform=platform)


def _unescape(text: str) -> str:
    """Percent-escapes of unreserved characters decoded, the others in upper case (RFC 3986 6.2.2)."""

    def one(match: re.Match[str]) -> str:
        byte = int(match.group(1), 16)
        return chr(byte) if byte in _UNRESERVED else f"%{match.group(1).upper()}"

    return _ESCAPE.sub(one, text)


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
        return _DEFAULT_PORTS[scheme]
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValidationError("notify.url.port", "webhook_url", port=text or None)
    return int(text)


def _ascii_host(raw: str) -> str:
    """The host in its normal form: IDNA ASCII, lower case, no trailing dot; an IP address (also one
    spelled in a legacy numeric form) as its standard text."""
    literal = _ip(raw)
    if literal is not None:
        return str(literal)
    host = _DOTS.sub(".", raw)
    host = host[:-1] if host.endswith(".") else host
    try:
        ascii_host = host.lower() if host.isascii() else idna.encode(host, uts46=True).decode().lower()
    except (idna.IDNAError, UnicodeError) as exc:
        raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason=str(exc)) from None
    numeric = _legacy_ipv4(ascii_host)
    if numeric is not None:
        return str(numeric)
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason=_label_reason(labels))
    if _NUMBER.match(labels[-1]):
        # A name whose last label is a number is read as an IPv4 address by resolvers and browsers: one
        # that is not a valid address is no host at all.
        raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason="not a valid IPv4 address")
    for label in labels:
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError) as exc:
                raise ValidationError("notify.url.idna", "webhook_url", host=raw, reason=str(exc)) from None
    return ascii_host


_NUMBER = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host in inet_aton's forms reaches (``127.1``, ``0x7f.0.0.1``, ``017700000001``,
    ``2130706433``, ``0``), as resolvers (and browsers) read it; None for a name."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER.match(p) for p in parts):
        return None
    numbers = []
    for part in parts:
        if part.startswith("0x"):
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not all(c in "01234567" for c in part):
                return None
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for position, n in enumerate(head):
        value += n << (8 * (3 - position))
    return ipaddress.IPv4Address(value)


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


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


_SHARED = ipaddress.ip_network("100.64.0.0/10")
#: IPv6 prefixes whose last 32 bits are an IPv4 address that the packet ends up at.
_EMBEDDING = (
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64, well-known prefix
    ipaddress.ip_network("64:ff9b:1::/48"),  # NAT64, local use
    ipaddress.ip_network("::ffff:0:0:0/96"),  # SIIT, IPv4-translated
    ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated)
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to: IPv4-mapped, 6to4, Teredo (server and client),
    NAT64/SIIT and IPv4-compatible forms."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in net for net in _EMBEDDING[:3]):
        found.append(low)
    elif address in _EMBEDDING[3] and int(address) > 1:  # not :: or ::1, judged as themselves
        found.append(low)
    return found


def address_kind(address: IPAddress) -> str | None:
    """``loopback``, ``link_local``, ``private`` or ``reserved`` for a non-public address (or an IPv6
    address that leads to one), else None."""
    if isinstance(address, ipaddress.IPv6Address):
        for inner in embedded_ipv4(address):
            kind = address_kind(inner)
            if kind is not None:
                return kind
        if address.ipv4_mapped is not None:
            return None  # an IPv4 address spelled as IPv6: judged as that address, and it is public
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link_local"
    if address.is_private or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED):
        return "private"
    if not address.is_global or address.is_multicast or address.is_unspecified or address.is_reserved:
        return "reserved"
    return None


def refuse_address(host: str, address: IPAddress) -> None:
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
    """The addresses the system resolver gives for ``host``, in the order it gives them."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def resolve_destination(host: str, port: int, *, allow_private: bool, resolver: Resolver) -> list[IPAddress]:
    """At send time: the addresses ``host`` resolves to (once), each checked; the sender connects to the
    first of them and to nothing else, so a name that answers differently the next time (DNS rebinding)
    cannot move the request.

    Raises `ValidationError` (a configuration error) when any address is private, loopback or
    link-local; a resolver failure (``OSError``) propagates, the caller treats it as a network error
    worth retrying.
    """
    literal = _ip(host)
    if not allow_private:
        _refuse_private_name(host)
    texts = [str(literal)] if literal is not None else await resolver(host, port)
    addresses = [ipaddress.ip_address(text.split("%", 1)[0]) for text in texts]
    if not addresses:
        raise OSError(f"{host} has no address")
    if not allow_private:
        for address in addresses:
            refuse_address(host, address)
    return addresses


async def check_destination(host: str, port: int, *, allow_private: bool, resolver: Resolver) -> None:
    """`resolve_destination` without its result."""
    await resolve_destination(host, port, allow_private=allow_private, resolver=resolver)
