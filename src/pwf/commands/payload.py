"""Reading request payloads with the original's validation messages (DOMAIN §8)."""

from __future__ import annotations

from typing import Final

from pwf.commands import refuse

__all__ = [
    "absolute_path",
    "members",
    "members_or_none",
    "optional_text",
    "positive_int",
    "text",
]

_MAX_SAFE: Final = 2**53 - 1


def members(payload: object, name: str = "payload") -> dict[str, object]:
    """The payload as an object, else "{name} must be an object"."""
    if not isinstance(payload, dict):
        raise refuse(f"{name} must be an object")
    return payload


def members_or_none(payload: object) -> dict[str, object]:
    """The payload's members when it is an object, else none (where it is read leniently)."""
    return payload if isinstance(payload, dict) else {}


def text(values: dict[str, object], name: str) -> str:
    """A non-empty text member, else "{name} must be text"."""
    value = values.get(name)
    if not isinstance(value, str) or not value:
        raise refuse(f"{name} must be text")
    return value


def optional_text(values: dict[str, object], name: str) -> str | None:
    """A text member when present (absent or null gives None)."""
    if values.get(name) is None:
        return None
    return text(values, name)


def absolute_path(values: dict[str, object], name: str) -> str:
    """A text member holding an absolute path, else "{name} must be an absolute path"."""
    value = values.get(name)
    if not isinstance(value, str) or not value.startswith("/"):
        raise refuse(f"{name} must be an absolute path")
    return value


def positive_int(value: object) -> int | None:
    """The value when it is a safe positive integer, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_SAFE:
        return value
    return None
