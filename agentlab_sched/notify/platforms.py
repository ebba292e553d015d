"""What each platform is sent, and how its answer is judged.

Bodies: generic JSON payload, Feishu/Lark interactive card (signed in the body), WeCom markdown,
DingTalk markdown (signed in the query). Every body fits the platform's size limit: the text is cut at
a character boundary and says so. Answers are judged by the rules of the URL's *host*: the chat
platforms answer HTTP 200 when they refuse, with the verdict in ``code`` / ``errcode``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import httpx

from agentlab_sched.messages import render, term

#: Per-bot rate limits: (sends, per seconds), all of which must hold.
RATE_LIMITS: dict[str, tuple[tuple[int, float], ...]] = {
    "feishu": ((5, 1.0), (100, 60.0)),
    "dingtalk": ((20, 60.0),),
    "wecom": ((20, 60.0),),
    "generic": (),
}

#: Size limits in UTF-8 bytes: the whole body (Feishu, DingTalk, generic) or the markdown content (WeCom).
SIZE_LIMITS: dict[str, int] = {"feishu": 20_000, "dingtalk": 20_000, "wecom": 4096, "generic": 65_536}

#: Longest run error copied into the generic payload's ``error`` field (the text carries it too).
GENERIC_ERROR_CHARS = 8000

#: Platform codes worth retrying, and the least wait before the retry (seconds).
RETRY_CODES: dict[str, dict[int, float]] = {
    "feishu": {11232: 1.0},
    "dingtalk": {130101: 60.0, 410100: 60.0, -1: 0.0},
    "wecom": {45009: 60.0, -1: 0.0},
}

#: Message codes that say what to fix for a platform's configuration errors.
FIXES: dict[tuple[str, int], str] = {
    ("feishu", 19001): "notify.fix.feishu_token",
    ("feishu", 19021): "notify.fix.feishu_sign",
    ("feishu", 19022): "notify.fix.ip_allowlist",
    ("feishu", 19024): "notify.fix.keyword",
    ("feishu", 9499): "notify.fix.bad_request",
    ("dingtalk", 310000): "notify.fix.dingtalk_security",
    ("dingtalk", 300001): "notify.fix.token",
    ("dingtalk", 300005): "notify.fix.token",
    ("dingtalk", 400101): "notify.fix.token",
    ("dingtalk", 400102): "notify.fix.bot_disabled",
    ("dingtalk", 400106): "notify.fix.token",
    ("dingtalk", 400013): "notify.fix.token",
    ("wecom", 93000): "notify.fix.wecom_key",
    ("wecom", 40058): "notify.fix.too_long",
}

CONTENT_TYPE = "application/json; charset=utf-8"
USER_AGENT = "agentlab-sched"


@dataclass(frozen=True)
class Message:
    """One notification, before it is shaped for a platform.

    ``lines`` are short paragraphs of plain text (Markdown-safe); ``fields`` are the generic payload's
    machine-readable fields (event, schedule, run_id, ...).
    """

    title: str
    lines: tuple[str, ...]
    locale: str
    link: str | None = None
    #: Feishu card header colour: green, red, orange, blue
    color: str = "blue"
    fields: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Prepared:
    """An HTTP request ready to send."""

    url: str
    headers: dict[str, str]
    body: bytes
    #: the text was cut to fit the platform's size limit
    truncated: bool = False


@dataclass(frozen=True)
class Verdict:
    """How one attempt went: ``sent``, ``retry`` (worth another try) or ``failed`` (configuration)."""

    outcome: str
    http_status: int | None = None
    platform_code: str | None = None
    platform_text: str | None = None
    #: least seconds to wait before retrying (Retry-After, platform throttles)
    min_delay: float = 0.0
    #: message code of what went wrong (for people), None when sent
    problem: str | None = None
    problem_params: Mapping[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome == "sent"


def dumps(value: object) -> bytes:
    """UTF-8 JSON without ``\\u`` escapes."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def feishu_sign(secret: str, timestamp: int) -> str:
    """Feishu/Lark 签名校验: base64(HMAC-SHA256(key = "<ts>\\n<secret>", message = empty))."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode("ascii")


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk 加签: base64(HMAC-SHA256(key = secret, msg = "<ts ms>\\n<secret>")), URL-encoded later."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def generic_signature(secret: str, timestamp: int, body: bytes) -> str:
    """The generic ``X-Agentlab-Signature``: ``t=<ts>,v1=<hex HMAC-SHA256(secret, "<ts>." + body)>``."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def _fit(build: Callable[[str], bytes], text: str, limit: int, note: str) -> tuple[str, bool]:
    """The longest prefix of ``text`` (whole characters) + ``note`` whose built size fits ``limit``."""
    if len(build(text)) <= limit:
        return text, False
    low, high = 0, len(text)
    while low < high:  # largest k with build(text[:k] + note) within the limit
        mid = (low + high + 1) // 2
        if len(build(text[:mid] + note)) <= limit:
            low = mid
        else:
            high = mid - 1
    return text[:low].rstrip() + note, True


#: Characters that open markup in the chat platforms' Markdown (tags and mentions such as
#: ``<at id=all></at>`` or ``<@user>``, entities, links and images, emphasis, code, ``@all``), replaced
#: by their full-width look-alikes, which no platform reads as markup.
_MARKUP = str.maketrans(
    {"<": "＜", ">": "＞", "&": "＆", "[": "［", "]": "］", "*": "＊", "`": "｀", "~": "～", "@": "＠", "|": "｜",
     "\\": "＼"}
)  # fmt: skip
#: Block markup at the start of a line (headings, quotes, lists, rules).
_LINE_START = re.compile(r"(^|\n)([ \t]*)([#>+=-])")
_FULL_WIDTH = {"#": "＃", ">": "＞", "+": "＋", "=": "＝", "-": "－"}


def plain_markdown(text: str) -> str:
    """``text`` (a line of a notification: a schedule's name, a task's error, an approval title inside
    our words) made inert for the chat platforms' Markdown: it shows as written, but mentions nobody,
    links and shows nothing, and formats nothing. URLs lose their ``://`` so that no client links them."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _LINE_START.sub(lambda m: m.group(1) + m.group(2) + _FULL_WIDTH[m.group(3)], text.translate(_MARKUP))
    return text.replace("://", "：//")


def _text(message: Message, sep: str = "\n", *, markdown: bool = False) -> str:
    lines = [plain_markdown(line) for line in message.lines] if markdown else message.lines
    return sep.join(lines)


def prepare(fmt: str, url: str, secret: str | None, message: Message, now: datetime) -> Prepared:
    """The request for ``message`` in format ``fmt`` to ``url``, signed at ``now`` when ``secret`` is set."""
    loc = message.locale
    limit = SIZE_LIMITS[fmt]
    note = "\n\n" + render("notify.cut", loc, platform=term(f"notify.platform.{fmt}"), limit=limit)
    headers = {"Content-Type": CONTENT_TYPE, "User-Agent": USER_AGENT}
    timestamp = int(now.timestamp())
    link_line = ""
    if message.link:
        link_line = render("notify.link_markdown", loc, url=message.link)

    if fmt == "generic":
        fields = dict(message.fields)
        error = fields.get("error")
        if isinstance(error, str) and len(error) > GENERIC_ERROR_CHARS:
            fields["error"] = error[:GENERIC_ERROR_CHARS] + "…"
        plain = _text(message) + (f"\n{message.link}" if message.link else "")

        def build_generic(text: str) -> bytes:
            return dumps({**fields, "title": message.title, "text": text})

        text, cut = _fit(build_generic, plain, limit, note)
        body = build_generic(text)
        key = fields.get("idempotency_key")
        if key:
            headers["Idempotency-Key"] = str(key)
        if secret:
            headers["X-Agentlab-Signature"] = generic_signature(secret, timestamp, body)
        return Prepared(url, headers, body, cut)

    if fmt == "feishu":
        signing = {"timestamp": str(timestamp), "sign": feishu_sign(secret, timestamp)} if secret else {}

        def build_feishu(text: str) -> bytes:
            card = {
                "header": {
                    "title": {"tag": "plain_text", "content": plain_markdown(message.title)},
                    "template": message.color,
                },
                "elements": [{"tag": "div", "text": {"tag": "lark_md", "content": text}}],
            }
            return dumps({**signing, "msg_type": "interactive", "card": card})

        content = _text(message, markdown=True) + (f"\n{link_line}" if link_line else "")
        text, cut = _fit(build_feishu, content, limit, note)
        return Prepared(url, headers, build_feishu(text), cut)

    if fmt == "wecom":
        title = plain_markdown(message.title)
        content = f"**{title}**\n" + _text(message, markdown=True) + (f"\n{link_line}" if link_line else "")
        text, cut = _fit(lambda t: t.encode("utf-8"), content, limit, note)
        return Prepared(url, headers, dumps({"msgtype": "markdown", "markdown": {"content": text}}), cut)

    if fmt == "dingtalk":
        title = plain_markdown(message.title)
        content = f"### {title}\n\n" + _text(message, "\n\n", markdown=True) + (f"\n\n{link_line}" if link_line else "")

        def build_dingtalk(text: str) -> bytes:
            return dumps({"msgtype": "markdown", "markdown": {"title": title, "text": text}})

        text, cut = _fit(build_dingtalk, content, limit, note)
        target = url
        if secret:
            millis = int(now.timestamp() * 1000)
            target = str(
                httpx.URL(url).copy_merge_params({"timestamp": str(millis), "sign": dingtalk_sign(secret, millis)})
            )
        return Prepared(target, headers, build_dingtalk(text), cut)

    raise ValueError(f"unknown webhook format: {fmt}")


def _retry_after(headers: Mapping[str, str]) -> float:
    raw = headers.get("retry-after", "").strip()
    if raw.isdigit():
        return min(float(raw), 3600.0)
    return 0.0


def judge(platform: str, status: int, headers: Mapping[str, str], body: bytes) -> Verdict:
    """The verdict on one HTTP answer, by the rules of the host's ``platform`` (not the chosen format)."""
    snippet = body[:500].decode("utf-8", errors="replace").strip() or None
    if 300 <= status < 400:
        return Verdict(
            "failed",
            status,
            platform_text=snippet,
            problem="notify.problem.redirect",
            problem_params={"location": headers.get("location") or None},
        )
    if status in (408, 425, 429) or status >= 500:
        return Verdict(
            "retry",
            status,
            platform_text=snippet,
            min_delay=_retry_after(headers),
            problem="notify.problem.http_retry",
            problem_params={"status": status},
        )
    if not 200 <= status < 300:
        return Verdict(
            "failed",
            status,
            platform_text=snippet,
            problem="notify.problem.http_refused",
            problem_params={"status": status},
        )
    if platform == "generic":
        return Verdict("sent", status, platform_text=snippet)

    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    key = "errcode" if platform in ("dingtalk", "wecom") else "code"
    if isinstance(data, dict) and platform == "feishu" and "code" not in data:
        key = "StatusCode"  # older Feishu replies
    raw_code = data.get(key) if isinstance(data, dict) else None
    try:
        code = int(raw_code) if raw_code is not None and not isinstance(raw_code, bool) else None
    except (TypeError, ValueError):
        code = None
    if code is None:
        return Verdict(
            "retry",
            status,
            platform_text=snippet,
            problem="notify.problem.undetermined",
            problem_params={"platform": term(f"notify.platform.{platform}")},
        )
    assert isinstance(data, dict)
    text_value = data.get("errmsg") if key == "errcode" else (data.get("msg") or data.get("StatusMessage"))
    text = str(text_value) if text_value is not None else snippet
    if code == 0:
        return Verdict("sent", status, str(code), text)
    retry = RETRY_CODES.get(platform, {})
    if code in retry:
        return Verdict(
            "retry",
            status,
            str(code),
            text,
            min_delay=retry[code],
            problem="notify.problem.platform_busy",
            problem_params={"platform": term(f"notify.platform.{platform}"), "code": code},
        )
    return Verdict(
        "failed",
        status,
        str(code),
        text,
        problem=FIXES.get((platform, code), "notify.fix.platform"),
        problem_params={"platform": term(f"notify.platform.{platform}"), "code": code},
    )


def describe(verdict: Verdict, locale: str) -> str:
    """What went wrong with an attempt, in words: the platform's code and text, and what to fix."""
    if verdict.problem is None:
        return ""
    if verdict.platform_code is not None:
        return render(
            "notify.refused",
            locale,
            platform=verdict.problem_params.get("platform"),
            status=verdict.http_status,
            code=verdict.platform_code,
            text=verdict.platform_text,
            fix=term(verdict.problem),
        )
    return render(verdict.problem, locale, **verdict.problem_params)
