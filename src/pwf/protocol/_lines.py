"""One canonical JSON object per line, read and written; imports canonical, errors and msgspec.

The client and the worker protocol read and write their lines by the same
rule and word their refusals each in its own way: a :class:`Dialect` holds
the words and the size limit, :func:`read_object` and :func:`encode_object`
the rule.  Both also write a message from its Struct the same way
(:func:`wire_members`, then the message's own reader as the check:
:func:`encode_message`) and check a member that names one of a set of
words the same way (:func:`one_of`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from pwf import canonical
from pwf.errors import CanonicalError, LineError, ProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "MAX_MESSAGE_DEPTH",
    "Dialect",
    "encode_message",
    "encode_object",
    "one_of",
    "read_object",
    "wire_members",
]

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


def one_of(members: Mapping[str, object], name: str, words: frozenset[str], refusal: str) -> str:
    """The member ``name``, which must be one of ``words``; ``refusal`` is the error otherwise."""
    value = members.get(name)
    if not isinstance(value, str) or value not in words:
        raise ProtocolError(refusal)
    return value


_FIELDS: dict[type, tuple[tuple[str, str, bool], ...]] = {}
"""Per message class: (attribute, wire name, whether None is the default) of each field.
``msgspec.structs.fields`` evaluates the class's annotations on every call."""


def _fields(cls: type[msgspec.Struct]) -> tuple[tuple[str, str, bool], ...]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(
            (field.name, field.encode_name, field.default is None)
            for field in msgspec.structs.fields(cls)
        )
    return found


def wire_members(message: msgspec.Struct) -> dict[str, object]:
    """The wire members of a message: camelCase, absent optional members omitted.

    A member is absent when it is :data:`canonical.MISSING`, or None where
    None is its field's default.
    """
    members: dict[str, object] = {}
    for name, wire_name, none_by_default in _fields(type(message)):
        value = getattr(message, name)
        if value is canonical.MISSING or (value is None and none_by_default):
            continue
        members[wire_name] = value
    return members


def encode_message(
    message: msgspec.Struct, check: Callable[[Mapping[str, object]], object], dialect: Dialect
) -> bytes:
    """Canonical bytes of a message's wire members, once ``check`` (the reader) accepts them."""
    members = wire_members(message)
    check(members)
    return encode_object(members, dialect)
