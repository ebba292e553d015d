"""Webhook URLs and secrets at rest: Fernet with the keys of ``AGENTLAB_SCHED_SECRET_KEY``.

Keys are comma-separated, newest first: encrypt with the newest, decrypt with any, `SecretBox.rotate`
re-encrypts with the newest. The database never holds a key, only ciphertext (``gAAAAA...``), each bound
to its schedule and field.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from agentlab_sched.errors import SchedError
from agentlab_sched.notify.urls import display_host
from agentlab_sched.settings import Settings

MAKE_KEY = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class Unreadable(Exception):
    """A ciphertext this box cannot use; ``bound_elsewhere`` says why.

    False: no key of this box opens it (it was saved with a key this process does not have). True: it
    opens, but belongs to another schedule or another field (copied there without the key), or was
    made before ciphertexts were bound to their schedule; no key can make it usable, set it again.
    """

    def __init__(self, bound_elsewhere: bool) -> None:
        super().__init__("bound to another schedule" if bound_elsewhere else "no key opens it")
        self.bound_elsewhere = bound_elsewhere


#: The fields a ciphertext can belong to.
FIELDS = ("webhook_url", "webhook_secret")


class SecretBox:
    """Encrypts with the newest key, decrypts with any of them.

    Each ciphertext is bound to one schedule and one field: the schedule's id and the field's name are
    inside the encrypted payload and checked when it is opened, so a ciphertext copied to another
    schedule (by a role that has no key) is refused rather than used.
    """

    def __init__(self, keys: tuple[str, ...] | list[str]) -> None:
        if not keys:
            raise SchedError("notify.no_key", "AGENTLAB_SCHED_SECRET_KEY", command=MAKE_KEY)
        fernets = []
        for position, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key.encode("ascii")))
            except (ValueError, UnicodeError):
                raise SchedError(
                    "notify.bad_key", "AGENTLAB_SCHED_SECRET_KEY", position=position, command=MAKE_KEY
                ) from None
        self._fernet = MultiFernet(fernets)

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        """The box for the deployment's keys; refuses (saying how to make a key) when there is none."""
        return cls(settings.secret_keys)

    def seal(self, value: str, *, schedule_id: int, field: str) -> str:
        """Ciphertext of ``value`` under the newest key, bound to ``schedule_id`` and ``field``."""
        if field not in FIELDS:
            raise ValueError(f"unknown field: {field}")
        payload = json.dumps({"schedule": schedule_id, "field": field, "value": value}, ensure_ascii=False)
        return self._fernet.encrypt(payload.encode("utf-8")).decode("ascii")

    def open(self, token: str, *, schedule_id: int, field: str) -> str:
        """The value sealed in ``token`` for ``schedule_id`` and ``field``; `Unreadable` otherwise."""
        try:
            payload = json.loads(self._fernet.decrypt(token.encode("ascii")).decode("utf-8"))
        except (InvalidToken, UnicodeError):
            raise Unreadable(bound_elsewhere=False) from None
        except ValueError:  # opens, but is no payload of ours (made before binding)
            raise Unreadable(bound_elsewhere=True) from None
        if (
            not isinstance(payload, dict)
            or payload.get("schedule") != schedule_id
            or payload.get("field") != field
            or not isinstance(payload.get("value"), str)
        ):
            raise Unreadable(bound_elsewhere=True)
        return payload["value"]

    def try_open(self, token: str | None, *, schedule_id: int, field: str) -> str | None:
        """`open`, or None when ``token`` is None or unreadable."""
        if token is None:
            return None
        try:
            return self.open(token, schedule_id=schedule_id, field=field)
        except Unreadable:
            return None

    def rotate(self, token: str) -> str | None:
        """``token`` re-encrypted under the newest key (its binding unchanged), or None when no key opens it."""
        try:
            return self._fernet.rotate(token.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeError):
            return None


def mask_url(url: str) -> str:
    """What may be shown of a webhook URL: scheme, host and port, and the last 4 characters; an
    internationalised host is shown in punycode beside its Unicode form (``аpple.com`` is not
    ``apple.com``).

    The whole URL is a credential (WeCom's ``key``, Feishu's token), so the path and query are hidden.
    """
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
    if len(rest) >= 16:
        shown = f"{base}/…{rest[-4:]}"
    else:
        shown = f"{base}/…" if rest.strip("/") else base
    host = parts.hostname or ""
    display = display_host(host)
    return f"{shown} {display[len(host) + 1 :]}" if display != host else shown


def mask_secret(secret: str | None) -> str | None:
    """A fixed mask for a set secret (nothing of it is shown), None when unset."""
    return "••••••" if secret else None
