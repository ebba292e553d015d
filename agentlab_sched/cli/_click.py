"""The command-line library's exceptions, wherever this typer keeps them (it vendors click since 0.20)."""

from __future__ import annotations

try:
    from typer._click import exceptions
except ImportError:  # a typer that depends on click instead
    from click import exceptions  # type: ignore[no-redef,import-not-found,unused-ignore]

__all__ = ["exceptions"]
