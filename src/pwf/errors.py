"""The exception tree of pwf; imports the standard library only.

Every error pwf raises on purpose derives from :class:`PwfError` and carries an
``exit_code`` (ADR 0006) plus the fields that explain it::

    PwfError (3)
    ├── InputError (2, ValueError)          bad input: nothing was appended
    │   ├── CanonicalError                  a value has no canonical JSON form
    │   │   └── NonFiniteNumberError        NaN or an infinity
    │   ├── LineError                       a protocol or log line was refused
    │   │   ├── LineTooLongError
    │   │   ├── InvalidUtf8Error
    │   │   ├── NotJsonError
    │   │   └── NonCanonicalLineError
    │   ├── ProtocolError                   a client or worker message was refused
    │   ├── EventDataError                  event data does not fit its type
    │   └── CommandError                    a handler refused: the original's text and outcome
    │       └── BlobConflictError           one blob hash stored under two media types
    ├── AnswerTooLargeError (4)             executed (and recorded), but its answer exceeds 1 MiB
    ├── StoreError (3)                      the event store failed
    │   ├── StoreBusyError                  the write lock was not granted in time
    │   ├── ChainError                      the log breaks its own rules
    │   ├── NotPwfDatabaseError (2)         the file is not a pwf database (also an InputError)
    │   └── ImportRefusedError (2)          a JSONL import was refused whole
    └── ConfigError (2)                     operator settings are invalid

Only ``pwf.cli`` turns these into exit codes and one-line messages.
"""

from __future__ import annotations

from typing import ClassVar, Literal

Outcome = Literal[
    "accepted", "adopted", "rejected", "conflict", "notFound", "claimLost", "unavailable"
]
"""What a response says happened (DOMAIN §7); a refusal carries one of these too."""


class PwfError(Exception):
    """Root of every error pwf raises on purpose."""

    exit_code: ClassVar[int] = 3


class InputError(PwfError, ValueError):
    """Input was refused; nothing was appended or projected."""

    exit_code: ClassVar[int] = 2


class CanonicalError(InputError):
    """A value cannot be written as the original's canonical JSON."""


class NonFiniteNumberError(CanonicalError):
    """NaN and the infinities have no JSON form."""

    def __init__(self) -> None:
        """Use the original's text."""
        super().__init__("JSON numbers must be finite")


class LineError(InputError):
    """A line (protocol message or log record) was refused."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        """Keep the byte offset of the fault when one is known."""
        super().__init__(message)
        self.offset = offset


class LineTooLongError(LineError):
    """A line exceeds the size limit."""

    def __init__(self, size: int, limit: int) -> None:
        """Name both sizes."""
        super().__init__(f"line of {size} bytes exceeds 1 MiB ({limit} bytes)")
        self.size, self.limit = size, limit


class InvalidUtf8Error(LineError):
    """A line is not valid UTF-8 (or starts with a byte order mark)."""


class NotJsonError(LineError):
    """A line does not parse as JSON."""


class NonCanonicalLineError(LineError):
    """A line parses, but is not byte-for-byte canonical."""


class ProtocolError(InputError):
    """A client or worker protocol message was refused; the connection closes."""


class EventDataError(InputError):
    """Event data does not fit the registered type of its tag."""


class CommandError(InputError):
    """A command handler raised: the batch is dropped and the client sees ``outcome``.

    The message is the original's error text, kept verbatim.  An executed
    command that raises records nothing (DOMAIN §7.3), so a retry runs again.
    """

    def __init__(self, message: str, outcome: Outcome = "rejected") -> None:
        """Keep the outcome the response carries (``rejected`` unless stated)."""
        super().__init__(message)
        self.outcome = outcome


class BlobConflictError(CommandError):
    """A content-addressed blob is already stored under another media type (DOMAIN §3.3).

    The read model raises it where the blob's upsert breaks its NOT NULL
    (by SQLite's error code, not its message); the batch is refused with
    the original's text.
    """


class AnswerTooLargeError(PwfError):
    """A request ran, and its outcome may be recorded, but its answer cannot be sent.

    The answer's line would exceed 1 MiB.  Nothing is undone: a retry with
    the same key is adopted into the same answer, so the caller is told what
    happened instead of a refusal of a line it never sent wrongly.  A served
    connection closes on it, as the original's does (HOST 1.15).
    """

    exit_code: ClassVar[int] = 4

    def __init__(self, outcome: str, *, recorded: bool) -> None:
        """Name the outcome and whether it was recorded."""
        done = "executed and recorded" if recorded else "executed"
        super().__init__(f"request {done} as {outcome}, but its answer exceeds 1 MiB")
        self.outcome, self.recorded = outcome, recorded


class StoreError(PwfError):
    """The event store could not do what was asked."""


class StoreBusyError(StoreError):
    """Another writer held the database past the busy timeout."""


class ChainError(StoreError):
    """The log breaks its own rules at a given seq."""

    def __init__(self, seq: int, reason: str) -> None:
        """Name the first bad seq and why."""
        super().__init__(f"seq {seq}: {reason}")
        self.seq, self.reason = seq, reason


class NotPwfDatabaseError(StoreError, InputError):
    """The file named is not a pwf database (another program's, not SQLite, or damaged).

    It is bad input wherever it is found, so every verb exits 2 for it.
    """

    exit_code: ClassVar[int] = 2


def os_error_text(error: OSError) -> str:
    """An operating-system error as one line without ``[Errno N]``: why, then the path."""
    why = error.strerror or str(error)
    return f"{why}: {error.filename}" if error.filename is not None else why


class ImportRefusedError(StoreError):
    """A JSONL import was refused as a whole; nothing was written."""

    exit_code: ClassVar[int] = 2

    def __init__(self, line_no: int, reason: str) -> None:
        """Name the first bad line and why."""
        super().__init__(f"line {line_no}: {reason}")
        self.line_no, self.reason = line_no, reason


class ConfigError(PwfError, ValueError):
    """Operator settings are invalid."""

    exit_code: ClassVar[int] = 2
