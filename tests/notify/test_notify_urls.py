"""Webhook URL validation when saved, and the destination check after DNS at send time."""

from __future__ import annotations

import pytest

from agentlab_sched.errors import ValidationError
from agentlab_sched.notify.urls import check_destination, platform_of, validate_url
from tests.support.notify_fakes import DINGTALK_URL, FEISHU_URL, LARK_URL, WECOM_URL, fake_dns


@pytest.mark.parametrize(
    ("url", "platform"),
    [(FEISHU_URL, "feishu"), (LARK_URL, "feishu"), (WECOM_URL, "wecom"), (DINGTALK_URL, "dingtalk")],
)
def test_platform_hosts_infer_their_format(url: str, platform: str) -> None:
    checked = validate_url(url)
    assert (checked.format, checked.platform) == (platform, platform)
    assert validate_url(url, platform).format == platform


def test_other_hosts_are_generic() -> None:
    checked = validate_url("https://hooks.example.com/agentlab/inbox-5c1d")
    assert (checked.format, checked.platform, checked.host, checked.port) == (
        "generic",
        "generic",
        "hooks.example.com",
        443,
    )
    assert platform_of("OPEN.FEISHU.CN.") == "feishu"


def refused(url: object, fmt: str | None = None, *, allow_private: bool = False) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        validate_url(url, fmt, allow_private=allow_private)
    return caught.value


def test_a_platform_url_with_another_format_is_refused_saying_which() -> None:
    err = refused(FEISHU_URL, "generic")
    assert err.field == "webhook_format"
    assert str(err) == (
        "open.feishu.cn is a Feishu/Lark bot address, so the webhook format must be feishu, not generic; "
        "leave the format out to have it taken from the URL"
    )
    assert err.message("zh-CN").startswith("open.feishu.cn 是飞书机器人的地址,Webhook 格式应为 feishu,不能是 generic")
    assert refused(WECOM_URL, "dingtalk").field == "webhook_format"
    assert refused(DINGTALK_URL, "feishu").field == "webhook_format"


def test_a_platform_format_needs_its_platform_host() -> None:
    err = refused("https://hooks.example.com/x", "wecom")
    assert "needs a WeCom bot URL (host qyapi.weixin.qq.com), but the host is hooks.example.com" in str(err)


def test_unknown_format_lists_the_choices() -> None:
    err = refused(FEISHU_URL, "slack")
    assert str(err) == "webhook format slack is not one of generic, feishu, wecom, dingtalk"
    assert err.message("zh-CN") == "Webhook 格式 slack 不在可选项 generic、feishu、wecom、dingtalk 之中"


def test_platform_hosts_need_https() -> None:
    err = refused(FEISHU_URL.replace("https://", "http://"))
    assert str(err) == "Feishu/Lark bot URLs must use https:// (host open.feishu.cn)"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "webhook URL is empty"),
        (None, "webhook URL is empty"),
        ("ftp://hooks.example.com/x", "must start with http:// or https:// (scheme: ftp)"),
        ("hooks.example.com/x", "(scheme: not set)"),
        ("https:///x", "webhook URL has no host"),
        ("https://hooks.example.com:0/x", "port 0 is not a number from 1 to 65535"),
        ("https://hooks.example.com:65536/x", "port 65536 is not a number from 1 to 65535"),
        ("https://hooks.example.com:8o8o/x", "port 8o8o is not"),
        ("https://hooks.example.com:/x", "port not set is not"),
        ("https://-bad-.example.com/x", "label starts or ends with a hyphen: -bad-"),
        ("https://a..example.com/x", "empty label"),
        ("https://xn--zz.example.com/x", "is not a valid domain name"),
        ("https://bad!host.com/x", "characters other than letters, digits and hyphens"),
    ],
)
def test_malformed_urls_are_refused_with_the_reason(url: object, words: str) -> None:
    err = refused(url)
    assert err.field == "webhook_url"
    assert words in str(err), str(err)
    assert "None" not in str(err) and "None" not in err.message("zh-CN")


@pytest.mark.parametrize(
    ("url", "char", "position"),
    [
        ("https://hooks.example.com/a b", "U+0020 SPACE", 28),
        ("https://hooks.exa\u200bmple.com/x", "U+200B ZERO WIDTH SPACE", 18),
        ("https://hooks.example.com/x\ufeff?y=1", "U+FEFF ZERO WIDTH NO-BREAK SPACE", 28),
        ("https://hooks.example.com/x\ty", "U+0009", 28),
        ("https://hooks.example.com/\u202ex", "U+202E RIGHT-TO-LEFT OVERRIDE", 27),
        ("https://hooks.example.com/\u3000x", "U+3000 IDEOGRAPHIC SPACE", 27),
    ],
)
def test_whitespace_control_and_invisible_characters_are_refused(url: str, char: str, position: int) -> None:
    err = refused(url)
    assert err.params["char"] == char and err.params["position"] == position
    assert str(err).startswith(f"webhook URL contains {char} at position {position}: remove it")
    assert err.message("zh-CN").startswith(f"Webhook 地址的第 {position} 个字符是 {char}")


def test_surrounding_blanks_from_a_paste_are_trimmed() -> None:
    assert validate_url(f"  {FEISHU_URL}\n").url == FEISHU_URL


def test_international_domain_names_are_converted_to_idna() -> None:
    checked = validate_url("https://例子.测试/hook")
    assert checked.host == "xn--fsqu00a.xn--0zwm56d" and checked.url == "https://xn--fsqu00a.xn--0zwm56d/hook"
    assert checked.display_host == "xn--fsqu00a.xn--0zwm56d (例子.测试)"


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:8080/x", "a loopback address"),
        ("http://localhost/x", "a loopback address"),
        ("http://[::1]/x", "a loopback address"),
        ("http://10.0.0.8/x", "a private network address"),
        ("http://192.168.1.20/x", "a private network address"),
        ("http://169.254.169.254/latest/meta-data", "a link-local address"),
        ("http://[fe80::1]/x", "a link-local address"),
        ("http://[::ffff:127.0.0.1]/x", "a loopback address"),
        ("http://100.64.0.1/x", "a private network address"),
        ("http://0.0.0.0/x", "a private network address"),
    ],
)
def test_private_destinations_are_refused_unless_allowed(url: str, kind: str) -> None:
    err = refused(url)
    assert kind in str(err) and "AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE=1" in str(err)
    assert validate_url(url, allow_private=True).format == "generic"


async def test_send_time_check_follows_dns() -> None:
    await check_destination("hooks.example.com", 443, allow_private=False, resolver=fake_dns)
    with pytest.raises(ValidationError) as caught:
        await check_destination("intranet.example.com", 443, allow_private=False, resolver=fake_dns)
    assert "intranet.example.com is a private network address (10.1.2.3)" in str(caught.value)
    await check_destination("intranet.example.com", 443, allow_private=True, resolver=fake_dns)
    with pytest.raises(OSError):
        await check_destination("nowhere.example.com", 443, allow_private=False, resolver=fake_dns)
