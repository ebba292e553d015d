"""Webhook URLs and secrets at rest: Fernet with the keys of ``AGENTLAB_SCHED_SECRET_KEY``.

Keys are comma-separated, newest first: encrypt with the newest, decrypt with any, `SecretBox.rotate`
re-encrypts with the newest. The database never holds a key, only ciphertext (``gAAAAA...``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from agentlab_sched.errors import SchedError
from agentlab_sched.settings import Settings

MAKE_KEY = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class SecretBox:
    """Encrypts with the newest key, decrypts with any of them."""

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

    def encrypt(self, plaintext: str) -> str:
        """Ciphertext of ``plaintext`` under the newest key."""
        return self._fernet.encrypt(plaintext.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str | None:
        """The plaintext, or None when no key opens ``token``."""
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            return None

    def rotate(self, token: str) -> str | None:
        """``token`` re-encrypted under the newest key, or None when no key opens it."""
        try:
            return self._fernet.rotate(token.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeError):
            return None


def mask_url(url: str) -> str:
    """What may be shown of a webhook URL: scheme, host and port, and the last 4 characters.

    The whole URL is a credential (WeCom's ``key``, Feishu's token), so the path and query are hidden.
    """
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
    if len(rest) >= 16:
        return f"{base}/…{rest[-4:]}"
    return f"{base}/…" if rest.strip("/") else base


def mask_secret(secret: str | None) -> str | None:
    """A fixed mask for a set secret (nothing of it is shown), None when unset."""
    return "••••••" if secret else None
