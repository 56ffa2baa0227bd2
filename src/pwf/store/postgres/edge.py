"""The edge of the PostgreSQL store: its URLs, and psycopg's errors turned into pwf's.

Imports psycopg and pwf's errors only.
"""

from __future__ import annotations

import re

import psycopg

from pwf.errors import StoreBusyError, StoreError

__all__ = ["as_bytes", "is_postgres_url", "shown_url", "translate_error"]


def is_postgres_url(text: str) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` connection URL."""
    return text.startswith(("postgresql://", "postgres://"))


def shown_url(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def translate_error(error: psycopg.Error, where: str) -> StoreError:
    """Turn a psycopg error into pwf's tree at the edge, with one clear line."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, psycopg.errors.UniqueViolation) and "_pwf_recorded" in text:
        return StoreError(f"{where}: another host already recorded this request ({text})")
    if isinstance(error, psycopg.errors.UniqueViolation):
        return StoreError(f"{where}: the log already holds that event ({text})")
    if isinstance(error, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)):
        return StoreBusyError(f"{where}: the log is locked by another writer ({text})")
    if isinstance(error, psycopg.errors.IdleInTransactionSessionTimeout):
        return StoreError(
            f"{where}: PostgreSQL ended this write, which held the log's lock idle too long;"
            f" nothing of it was written ({text})"
        )
    if isinstance(error, psycopg.OperationalError):
        return StoreError(f"{where}: cannot reach PostgreSQL ({text})")
    return StoreError(f"{where}: {text}")


def as_bytes(value: object) -> bytes:
    """A ``BYTEA`` value as bytes (psycopg returns bytes, or memoryview for some loaders)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, memoryview):
        return value.tobytes()
    raise StoreError("a stored body is not bytes")
