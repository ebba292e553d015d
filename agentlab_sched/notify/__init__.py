"""Notifications (docs/notifications.md): tell people when a scheduled run finishes, fails or waits for them.

- `set_webhook`, `get_webhook`, `rotate_secrets`, `test_send`: a schedule's webhook, encrypted at rest;
- `Dispatcher`: delivers the outbox beside a worker (`start()` / `stop(grace)`);
- ``sql/60_notify.sql``: the outbox trigger on runs and the guard against plaintext secrets in SQL.
"""

from __future__ import annotations

from agentlab_sched.notify.dispatcher import CHANNEL, Dispatcher, deliver_due
from agentlab_sched.notify.secrets import SecretBox, mask_url
from agentlab_sched.notify.sender import Sender
from agentlab_sched.notify.urls import FORMATS, PLATFORM_HOSTS, WebhookUrl, platform_of, validate_url
from agentlab_sched.notify.webhooks import (
    EVENTS,
    KEEP,
    TestResult,
    WebhookInfo,
    get_webhook,
    rotate_secrets,
    set_webhook,
    test_send,
)

__all__ = [
    "CHANNEL",
    "EVENTS",
    "FORMATS",
    "KEEP",
    "PLATFORM_HOSTS",
    "Dispatcher",
    "SecretBox",
    "Sender",
    "TestResult",
    "WebhookInfo",
    "WebhookUrl",
    "deliver_due",
    "get_webhook",
    "mask_url",
    "platform_of",
    "rotate_secrets",
    "set_webhook",
    "test_send",
    "validate_url",
]
