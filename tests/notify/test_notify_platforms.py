"""Bodies per platform, signing, size limits, judging answers by the host, and the words of messages."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agentlab_sched.notify.content import EventInfo, event_message
from agentlab_sched.notify.platforms import describe, judge, prepare
from tests.support.notify_fakes import (
    DINGTALK_BAD_SIGN,
    DINGTALK_NO_TOKEN,
    DINGTALK_OK,
    DINGTALK_SECRET,
    DINGTALK_TOO_FAST,
    DINGTALK_URL,
    FEISHU_BAD_SIGN,
    FEISHU_BAD_TOKEN,
    FEISHU_KEYWORD,
    FEISHU_LIMITED,
    FEISHU_OK,
    FEISHU_SECRET,
    FEISHU_URL,
    T0,
    WECOM_BAD_KEY,
    WECOM_LIMITED,
    WECOM_OK,
    WECOM_TOO_LONG,
    WECOM_URL,
    FakePlatforms,
)

RUN = "5f0c2a9e-1d2b-4c3d-8e4f-5a6b7c8d9e0f"


def info(**changes: Any) -> EventInfo:
    base = EventInfo(
        event="failed",
        schedule="daily-report",
        timezone="Asia/Shanghai",
        run_id=RUN,
        status="failed",
        error="step fetch_sales: HTTP 502 from the warehouse API",
        started_at=T0 + timedelta(seconds=2),
        finished_at=T0 + timedelta(minutes=3, seconds=30),
        kind="scheduled",
        fire_at=T0,
    )
    return dataclasses.replace(base, **changes)


def body(raw: bytes) -> dict:
    return json.loads(raw.decode("utf-8"))


# ---------------------------------------------------------------------------------------------- messages


def test_failed_message_in_english() -> None:
    msg = event_message(info(), "en", "https://sched.example.com/")
    assert msg.title == "daily-report: run #5f0c2a failed"
    assert msg.lines == (
        "Status: failed. Reason: step fetch_sales: HTTP 502 from the warehouse API",
        "Due at 2026-10-05 09:00 (Asia/Shanghai).",
        "Started 2026-10-05 09:00, ended 2026-10-05 09:03 (Asia/Shanghai), after 3 minutes 28 seconds.",
    )
    assert msg.link == f"https://sched.example.com/runs/{RUN}"
    assert msg.fields == {
        "event": "failed",
        "schedule": "daily-report",
        "run_id": RUN,
        "status": "failed",
        "segment": 1,
        "kind": "scheduled",
        "fire_at": "2026-10-05T01:00:00+00:00",
        "started_at": "2026-10-05T01:00:02+00:00",
        "finished_at": "2026-10-05T01:03:30+00:00",
        "error": "step fetch_sales: HTTP 502 from the warehouse API",
        "idempotency_key": f"agentlab-sched:{RUN}:failed:1",
    }


def test_failed_message_in_chinese() -> None:
    msg = event_message(info(kind="manual"), "zh-CN")
    assert msg.title == "daily-report:运行 #5f0c2a 失败"
    assert msg.lines[0] == "状态:失败。原因:step fetch_sales: HTTP 502 from the warehouse API"
    assert msg.lines[1] == "手动触发:2026-10-05 09:00(Asia/Shanghai)。"
    assert msg.link is None


@pytest.mark.parametrize(
    ("changes", "title", "line"),
    [
        ({"event": "finished", "status": "succeeded", "error": None}, "run #5f0c2a finished", "Status: finished."),
        (
            {"status": "timed_out", "timeout": timedelta(minutes=30)},
            "run #5f0c2a timed out",
            "Status: timed out after 30 minutes; the run was stopped.",
        ),
        (
            {"status": "suspended", "finished_at": None},
            "run #5f0c2a is suspended",
            f"Status: suspended. The worker running it stopped, and it will not continue by itself: resume it "
            f"(agentlab-sched runs resume {RUN}) or abandon it (agentlab-sched runs abandon {RUN}).",
        ),
        (
            {"event": "awaiting_approval", "status": "awaiting_approval", "step": "Check the totals", "segment": 2},
            "run #5f0c2a is awaiting approval",
            f"Status: awaiting approval of \u201cCheck the totals\u201d (segment 2). Approve it (agentlab-sched "
            f"runs approve {RUN}) or reject it (agentlab-sched runs reject {RUN}).",
        ),
        (
            {"error": None},
            "run #5f0c2a failed",
            f"Status: failed; no reason was recorded (see agentlab-sched runs show {RUN}).",
        ),
    ],
)
def test_each_status_in_the_products_words(changes: dict, title: str, line: str) -> None:
    msg = event_message(info(**changes), "en")
    assert msg.title == f"daily-report: {title}"
    assert msg.lines[0] == line


def test_caught_up_and_backfill_say_so() -> None:
    assert event_message(info(kind="misfire"), "en").lines[1] == (
        "Caught up after a miss: it was due at 2026-10-05 09:00 (Asia/Shanghai) and started late."
    )
    assert event_message(info(kind="misfire"), "zh-CN").lines[1] == "错过后补发:原定 2026-10-05 09:00(Asia/Shanghai)。"
    assert event_message(info(kind="backfill"), "en").lines[1] == "Backfill for 2026-10-05 09:00 (Asia/Shanghai)."


def test_no_python_reprs_in_any_message() -> None:
    bare = info(error=None, started_at=None, finished_at=None, kind=None, fire_at=None, step=None)
    for status in ("succeeded", "failed", "timed_out", "suspended", "awaiting_approval"):
        for loc in ("en", "zh-CN"):
            msg = event_message(EventInfo(**{**bare.__dict__, "status": status}), loc)
            text = msg.title + "\n".join(msg.lines)
            assert "None" not in text and "{" not in text, text


# ---------------------------------------------------------------------------------------------- bodies


def test_generic_payload_and_headers() -> None:
    msg = event_message(info(), "en", "https://sched.example.com")
    request = prepare("generic", "https://hooks.example.com/in", None, msg, T0)
    assert request.headers == {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "agentlab-sched",
        "Idempotency-Key": f"agentlab-sched:{RUN}:failed:1",
    }
    payload = body(request.body)
    assert set(payload) == {
        "event", "schedule", "run_id", "status", "segment", "kind", "fire_at", "started_at", "finished_at",
        "error", "title", "text", "idempotency_key",
    }  # fmt: skip
    assert payload["title"] == "daily-report: run #5f0c2a failed"
    assert payload["text"].endswith(f"\nhttps://sched.example.com/runs/{RUN}")
    assert b"\\u" not in request.body


def test_generic_signature_header() -> None:
    request = prepare("generic", "https://hooks.example.com/in", "s3cret", event_message(info(), "zh-CN"), T0)
    ts = int(T0.timestamp())
    expected = hmac.new(b"s3cret", f"{ts}.".encode() + request.body, hashlib.sha256).hexdigest()
    assert request.headers["X-Agentlab-Signature"] == f"t={ts},v1={expected}"
    assert "状态:失败" in request.body.decode("utf-8")  # UTF-8 as is, no \u escapes


def test_feishu_interactive_card_signed_in_the_body() -> None:
    msg = event_message(info(), "en", "https://sched.example.com")
    request = prepare("feishu", FEISHU_URL, FEISHU_SECRET, msg, T0)
    assert request.url == FEISHU_URL
    payload = body(request.body)
    ts = str(int(T0.timestamp()))
    key = f"{ts}\n{FEISHU_SECRET}".encode()
    content = "\n".join([*msg.lines, f"[Open the run](https://sched.example.com/runs/{RUN})"])
    assert payload == {
        "timestamp": ts,
        "sign": base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode(),
        "msg_type": "interactive",
        "card": {
            "header": {
                "title": {"tag": "plain_text", "content": "daily-report: run #5f0c2a failed"},
                "template": "red",
            },
            "elements": [{"tag": "div", "text": {"tag": "lark_md", "content": content}}],
        },
    }
    unsigned = body(prepare("feishu", FEISHU_URL, None, msg, T0).body)
    assert "sign" not in unsigned and "timestamp" not in unsigned


def test_wecom_markdown() -> None:
    msg = event_message(info(event="finished", status="succeeded", error=None), "zh-CN")
    payload = body(prepare("wecom", WECOM_URL, None, msg, T0).body)
    assert payload == {
        "msgtype": "markdown",
        "markdown": {"content": "**daily-report:运行 #5f0c2a 已完成**\n" + "\n".join(msg.lines)},
    }


def test_dingtalk_markdown_signed_in_the_query() -> None:
    msg = event_message(info(), "en")
    request = prepare("dingtalk", DINGTALK_URL, DINGTALK_SECRET, msg, T0)
    query = parse_qs(urlsplit(request.url).query)
    ms = str(int(T0.timestamp() * 1000))
    digest = hmac.new(DINGTALK_SECRET.encode(), f"{ms}\n{DINGTALK_SECRET}".encode(), hashlib.sha256).digest()
    assert query["timestamp"] == [ms]
    assert query["sign"] == [base64.b64encode(digest).decode()]  # URL-encoded once, decoded once here
    assert "%2B" in request.url or "%2F" in request.url or "%3D" in request.url
    assert body(request.body) == {
        "msgtype": "markdown",
        "markdown": {"title": "daily-report: run #5f0c2a failed",
                     "text": "### daily-report: run #5f0c2a failed\n\n" + "\n\n".join(msg.lines)},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("fmt", "url"),
    [
        ("feishu", FEISHU_URL),
        ("dingtalk", DINGTALK_URL),
        ("wecom", WECOM_URL),
        ("generic", "https://hooks.example.com/in"),
    ],
)
def test_long_text_is_cut_at_a_character_boundary_and_says_so(fmt: str, url: str) -> None:
    error = "失败原因🙂" * 20_000  # multi-byte characters, 4-byte emoji
    msg = event_message(info(error=error), "en")
    request = prepare(fmt, url, None, msg, T0)
    assert request.truncated
    payload = body(request.body)  # still valid UTF-8 JSON
    text = {
        "feishu": lambda p: p["card"]["elements"][0]["text"]["content"],
        "dingtalk": lambda p: p["markdown"]["text"],
        "wecom": lambda p: p["markdown"]["content"],
        "generic": lambda p: p["text"],
    }[fmt](payload)
    limit = {"feishu": 20_000, "dingtalk": 20_000, "wecom": 4096, "generic": 65_536}[fmt]
    size = len(text.encode()) if fmt == "wecom" else len(request.body)
    assert limit - 40 < size <= limit
    assert text.endswith(f"size limit of {limit} bytes)")
    kept = text.split("Reason: ", 1)[1].split("\n\n(cut", 1)[0]
    assert error.startswith(kept)


def test_short_text_is_not_cut() -> None:
    request = prepare("wecom", WECOM_URL, None, event_message(info(), "zh-CN"), T0)
    assert not request.truncated and "截断" not in request.body.decode()


# ---------------------------------------------------------------------------------------------- verdicts


def answer(payload: object, status: int = 200) -> tuple[int, dict, bytes]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return status, {}, raw


@pytest.mark.parametrize(
    ("platform", "payload", "outcome", "code"),
    [
        ("feishu", FEISHU_OK, "sent", "0"),
        ("feishu", {"StatusCode": 0, "StatusMessage": "success"}, "sent", "0"),
        ("feishu", FEISHU_BAD_TOKEN, "failed", "19001"),
        ("feishu", FEISHU_BAD_SIGN, "failed", "19021"),
        ("feishu", FEISHU_KEYWORD, "failed", "19024"),
        ("feishu", {"code": 19022, "data": {}, "msg": "ip not allowed"}, "failed", "19022"),
        ("feishu", {"code": 9499, "data": {}, "msg": "Bad Request"}, "failed", "9499"),
        ("feishu", FEISHU_LIMITED, "retry", "11232"),
        ("dingtalk", DINGTALK_OK, "sent", "0"),
        ("dingtalk", DINGTALK_BAD_SIGN, "failed", "310000"),
        ("dingtalk", DINGTALK_NO_TOKEN, "failed", "300001"),
        ("dingtalk", {"errcode": 400102, "errmsg": "机器人已停用"}, "failed", "400102"),
        ("dingtalk", DINGTALK_TOO_FAST, "retry", "130101"),
        ("dingtalk", {"errcode": 410100, "errmsg": "send too fast"}, "retry", "410100"),
        ("dingtalk", {"errcode": -1, "errmsg": "系统繁忙"}, "retry", "-1"),
        ("wecom", WECOM_OK, "sent", "0"),
        ("wecom", WECOM_BAD_KEY, "failed", "93000"),
        ("wecom", WECOM_TOO_LONG, "failed", "40058"),
        ("wecom", WECOM_LIMITED, "retry", "45009"),
    ],
)
def test_platform_answers_are_judged_by_their_code_not_http_200(
    platform: str, payload: dict, outcome: str, code: str
) -> None:
    verdict = judge(platform, *answer(payload))
    assert (verdict.outcome, verdict.http_status, verdict.platform_code) == (outcome, 200, code)


def test_platform_hosts_answering_non_json_are_undetermined_not_success() -> None:
    for platform in ("feishu", "wecom", "dingtalk"):
        verdict = judge(platform, *answer(b"<html>gateway</html>"))
        assert verdict.outcome == "retry" and not verdict.ok
        assert "cannot be confirmed" in describe(verdict, "en")
    assert judge("feishu", *answer({"data": {}})).outcome == "retry"  # JSON without its code


def test_generic_is_judged_by_http_status() -> None:
    assert judge("generic", *answer(b"")).ok
    assert judge("generic", *answer({"code": 19021}, 204)).ok  # a generic receiver's JSON means nothing
    assert judge("generic", 429, {"retry-after": "120"}, b"").outcome == "retry"
    assert judge("generic", 429, {"retry-after": "120"}, b"").min_delay == 120
    assert judge("generic", 503, {}, b"busy").outcome == "retry"
    assert judge("generic", 404, {}, b"").outcome == "failed"
    redirect = judge("generic", 302, {"location": "https://elsewhere.example.com/"}, b"")
    assert redirect.outcome == "failed" and "save the final URL" in describe(redirect, "en")


def test_the_host_decides_even_when_a_feishu_refusal_comes_with_http_200() -> None:
    # A Feishu URL saved as "generic" would call this a success; judged as Feishu (its host) it is not.
    assert judge("generic", *answer(FEISHU_BAD_SIGN)).ok
    assert not judge("feishu", *answer(FEISHU_BAD_SIGN)).ok


def test_refusals_are_described_with_code_text_and_fix() -> None:
    verdict = judge("feishu", *answer(FEISHU_BAD_SIGN))
    assert describe(verdict, "en") == (
        "Feishu/Lark refused the message (HTTP 200, code 19021: sign match fail or timestamp is not within one "
        "hour from current time). The signature was refused: set the secret shown under the bot's signature "
        "verification (签名校验), and check that this machine's clock is within an hour of the right time."
    )
    assert describe(verdict, "zh-CN").startswith("飞书拒收了消息(HTTP 200,错误码 19021:sign match fail")
    assert "重新复制 Webhook 地址" in describe(judge("wecom", *answer(WECOM_BAD_KEY)), "zh-CN")


async def test_fake_platforms_accept_what_prepare_makes() -> None:
    fake = FakePlatforms()
    fake.add(FEISHU_URL, FEISHU_SECRET)
    fake.add(DINGTALK_URL, DINGTALK_SECRET)
    fake.add(WECOM_URL)
    msg = event_message(info(), "zh-CN")
    async with httpx.AsyncClient(transport=fake.transport()) as client:
        for fmt, url, secret in [("feishu", FEISHU_URL, FEISHU_SECRET), ("dingtalk", DINGTALK_URL, DINGTALK_SECRET),
                                 ("wecom", WECOM_URL, None)]:  # fmt: skip
            request = prepare(fmt, url, secret, msg, T0)
            reply = await client.post(request.url, content=request.body, headers=request.headers)
            assert judge(fmt, reply.status_code, reply.headers, reply.content).ok, reply.text
            # a wrong secret is refused by the platform's own check
            bad = prepare(fmt, url, "wrong", msg, T0) if secret else None
            if bad is not None:
                reply = await client.post(bad.url, content=bad.body, headers=bad.headers)
                assert judge(fmt, reply.status_code, reply.headers, reply.content).platform_code in ("19021", "310000")
