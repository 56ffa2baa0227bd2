"""One canonical JSON object per line, read and written; imports canonical and errors.

The client and the worker protocol read and write their lines by the same
rule and word their refusals each in its own way: a :class:`Dialect` holds
the words and the size limit, :func:`read_object` and :func:`encode_object`
the rule.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from pwf import canonical
from pwf.errors import CanonicalError, LineError, ProtocolError

__all__ = ["MAX_MESSAGE_DEPTH", "Dialect", "encode_object", "read_object"]

MAX_MESSAGE_DEPTH: Final = 128
"""Deepest array/object nesting a message may have; events add a few levels and must verify."""


class Dialect(NamedTuple):
    """How one protocol limits its messages and words the refusals of a line."""

    name: str
    """``Client`` or ``Worker``: the first word of each refusal."""
    limit: int
    """The largest message in bytes, without its newline."""
    too_large: str
    """The refusal of a message over ``limit``."""
    not_canonical: str
    """The refusal of a line that is not canonical JSON, before ``: <why>``."""
    not_object: str
    """The refusal of a canonical line that holds no object."""


def read_object(line: bytes, dialect: Dialect) -> dict[str, object]:
    """Parse a message (without its newline) that must be one canonical JSON object."""
    if len(line) > dialect.limit:
        raise ProtocolError(dialect.too_large)
    if canonical.nesting_depth(line, MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH:
        raise ProtocolError(
            f"{dialect.name} protocol message nests deeper than {MAX_MESSAGE_DEPTH} levels"
        )
    try:
        value = canonical.parse_line(line)
    except LineError as error:
        raise ProtocolError(f"{dialect.not_canonical}: {error}") from error
    if not isinstance(value, dict):
        raise ProtocolError(dialect.not_object)
    return value


def encode_object(members: dict[str, object], dialect: Dialect) -> bytes:
    """Canonical bytes of checked members, at most the dialect's limit."""
    try:
        data = canonical.encode(members)
    except CanonicalError as error:
        raise ProtocolError(
            f"{dialect.name} protocol message has no canonical JSON form: {error}"
        ) from error
    if len(data) > dialect.limit:
        raise ProtocolError(dialect.too_large)
    return data
