"""``pwf call``: send request lines from stdin to the running host, one answer line each.

Imports :mod:`pwf.client` and the standard library only: it starts without
click, pydantic or the rest of the command line (``pwf._entry`` routes
``pwf call`` here first).  Lines are sent one at a time, in order.  When the
connection is lost before an answer, the line is sent again with the same
``requestId`` once a host answers, so work already done comes back
``adopted`` (DOMAIN §7.2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, NamedTuple

from pwf.client import (
    HelloError,
    HostClient,
    HostUnavailableError,
    default_db,
    message_lines,
    socket_path,
    wait_for_host,
)
from pwf.protocol.wire import MAX_FRAMED_MESSAGE_BYTES

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["main"]

USAGE: Final = """Usage: pwf call [--db PATH] [--wait S] [--retry-for S] [--canonicalize]

  Send client-protocol request lines read from stdin to the running pwf
  serve of the database and print one canonical response line for each.

  Each non-empty stdin line is one canonical pi-workflows.client.v1 request;
  lines starting with "#" are comments.  A line that is not a request is
  reported on stderr as "line N: why" and makes the exit code 2.  When the
  connection is lost before an answer, the same line (same requestId) is
  sent again once a host answers, for up to --retry-for seconds (default
  30), so a request the lost host had already done comes back "adopted".
  A line the host refuses by closing the connection is reported with the
  reason the host's log gives (for a line that is not canonical JSON, the
  byte where it differs).  When no host is running at the database's
  socket, pwf call says so at once and exits 3, unless --wait asks it to
  wait for one to start.

Options:
  --db PATH            State database (default: $PWF_DB, else ./.pwf/state.db).
  --wait S             How long to wait for a host to start (default 0).
  --retry-for S        How long to wait for a host to answer again.
  --canonicalize       Rewrite each line into canonical JSON before sending it
                       (key order, spacing, number forms); says so once on stderr.
  -h, --help           Show this message and exit.
"""
_REFUSED_AFTER: Final = 2
"""A line on which a reachable host closed the connection this many times is refused."""


class _Usage(Exception):  # noqa: N818 - internal control flow for bad arguments
    pass


class _Options(NamedTuple):
    db: Path
    wait: float
    retry_for: float
    canonicalize: bool


def _seconds(name: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise _Usage(f"Invalid value for '{name}': {value!r} is not a number.") from None
    if not seconds >= 0:
        raise _Usage(f"Invalid value for '{name}': {value!r} is negative.")
    return seconds


def _options(argv: list[str]) -> _Options:
    db: str | None = None
    retry = 30.0
    wait = 0.0
    canonicalize = False
    items = iter(argv)
    for item in items:
        name, _, inline = item.partition("=")
        if item in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if item == "--canonicalize":
            canonicalize = True
            continue
        if name not in ("--db", "--retry-for", "--wait"):
            raise _Usage(f"No such option: {item}")
        value = inline if "=" in item else next(items, None)
        if value is None:
            raise _Usage(f"Option '{name}' requires an argument.")
        if name == "--db":
            db = value
        elif name == "--wait":
            wait = _seconds(name, value)
        else:
            retry = _seconds(name, value)
    return _Options(Path(db).absolute() if db else default_db(), wait, retry, canonicalize)


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The numbered request lines of ``stream``: comment lines (``#``) are skipped."""
    for number, line in message_lines(stream):
        if not line.startswith(b"#"):
            yield number, line


def _request_id(line: bytes) -> str:
    """The line's requestId; a line that cannot be a request is refused here, not sent."""
    if len(line) > MAX_FRAMED_MESSAGE_BYTES:
        raise ValueError("Client protocol message exceeds 1 MiB")
    try:
        value = json.loads(line)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(value, dict) or value.get("type") != "request":
        raise ValueError("Expected client request")
    request_id = value.get("requestId")
    if not isinstance(request_id, str) or not request_id:
        raise ValueError("requestId must be text")
    return request_id


class _Caller:
    """One connection at a time; a lost one is replaced before the line is sent again."""

    def __init__(self, path: Path, wait: float, retry_for: float) -> None:
        self.path = path
        self.wait = wait
        self.retry_for = retry_for
        self.reached = False
        """Whether a host has answered yet: before, pwf call waits --wait; after, --retry-for."""
        self.client: HostClient | None = None

    def answer(self, line: bytes, request_id: str) -> bytes:
        strikes = 0
        while True:
            if self.client is None:
                timeout = self.retry_for if self.reached else self.wait
                self.client = wait_for_host(self.path, timeout=timeout)
                self.reached = True
            try:
                self.client.send(line)
                return self.client.response(request_id)[1]
            except HostUnavailableError:
                self.client.close()
                self.client = None
            try:
                self.client = HostClient.connect(self.path)
            except HostUnavailableError:
                strikes = 0
                continue
            strikes += 1
            if strikes >= _REFUSED_AFTER:
                raise ValueError(f"the host closed the connection on this line: {_why(line)}")

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _why(line: bytes) -> str:
    """Why the host refused ``line``, as its log says: the protocol parser's own reason.

    The parser is imported only here, once a host has refused a line.
    """
    from pwf.errors import ProtocolError  # noqa: PLC0415 - only a refused line needs the parser
    from pwf.protocol.client import parse_request  # noqa: PLC0415 - as above

    try:
        parse_request(line)
    except ProtocolError as error:
        hint = "; pass --canonicalize to rewrite it" if "canonical JSON" in str(error) else ""
        return f"{error}{hint}"
    return "it is not a request the host accepts"


class _Canonicalizer:
    """``--canonicalize``: each line's canonical form, and one note the first time it differs."""

    def __init__(self) -> None:
        self.noted = False

    def __call__(self, line: bytes) -> bytes:
        from pwf import canonical  # noqa: PLC0415 - only --canonicalize needs the encoder
        from pwf.errors import LineError  # noqa: PLC0415 - as above

        try:
            rewritten = canonical.canonical_line(line, limit=MAX_FRAMED_MESSAGE_BYTES)
        except LineError as error:
            raise ValueError(str(error)) from None
        if rewritten != line and not self.noted:
            self.noted = True
            sys.stderr.write(
                "note: --canonicalize rewrites input lines into canonical JSON before sending\n"
            )
        return rewritten


def main(argv: list[str] | None = None) -> int:
    """Run ``pwf call`` with ``argv`` (the arguments after ``call``); its exit code."""
    try:
        options = _options(sys.argv[2:] if argv is None else argv)
    except _Usage as error:
        sys.stderr.write(f"{USAGE.splitlines()[0]}\nError: {error}\n")
        return 2
    caller = _Caller(socket_path(options.db), options.wait, options.retry_for)
    rewrite = _Canonicalizer() if options.canonicalize else None
    out = sys.stdout.buffer
    refused = False
    try:
        for number, read in _lines(sys.stdin.buffer):
            try:
                line = read if rewrite is None else rewrite(read)
                reply = caller.answer(line, _request_id(line))
            except ValueError as error:
                sys.stderr.write(f"line {number}: {error}\n")
                refused = True
                continue
            out.write(reply + b"\n")
            out.flush()
    except HostUnavailableError as error:
        if caller.reached:
            sys.stderr.write(f"Error: {error}\n")
        else:
            waited = f" after waiting {options.wait:g} s" if options.wait else ""
            sys.stderr.write(
                f"Error: no pwf host is running at {caller.path}{waited}; start one with:"
                f" pwf serve --db {options.db} (or pass --wait SECONDS to wait for it)\n"
            )
        return 3
    except HelloError as error:
        sys.stderr.write(f"Error: {error}\n")
        return 3
    finally:
        caller.close()
    return 2 if refused else 0
