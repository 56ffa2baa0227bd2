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
from typing import TYPE_CHECKING, BinaryIO, Final

from pwf.client import (
    HelloError,
    HostClient,
    HostUnavailableError,
    default_db,
    socket_path,
    wait_for_host,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["main"]

USAGE: Final = """Usage: pwf call [--db PATH] [--wait SECONDS] [--retry-for SECONDS]

  Send client-protocol request lines read from stdin to the running pwf
  serve of the database and print one canonical response line for each.

  Each non-empty stdin line is one canonical pi-workflows.client.v1 request;
  lines starting with "#" are comments.  A line that is not a request is
  reported on stderr as "line N: why" and makes the exit code 2.  When the
  connection is lost before an answer, the same line (same requestId) is
  sent again once a host answers, for up to --retry-for seconds (default
  30), so a request the lost host had already done comes back "adopted".
  When no host is running at the database's socket, pwf call says so at
  once and exits 3, unless --wait asks it to wait for one to start.

Options:
  --db PATH            State database (default: $PWF_DB, else ./.pwf/state.db).
  --wait SECONDS       How long to wait for a host to start (default 0).
  --retry-for SECONDS  How long to wait for a host to answer again.
  -h, --help           Show this message and exit.
"""
_READ_LIMIT: Final = 1_048_577
_REFUSED_AFTER: Final = 2
"""A line on which a reachable host closed the connection this many times is refused."""


class _Usage(Exception):  # noqa: N818 - internal control flow for bad arguments
    pass


def _seconds(name: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise _Usage(f"Invalid value for '{name}': {value!r} is not a number.") from None
    if not seconds >= 0:
        raise _Usage(f"Invalid value for '{name}': {value!r} is negative.")
    return seconds


def _options(argv: list[str]) -> tuple[Path, float, float]:
    db: str | None = None
    retry = 30.0
    wait = 0.0
    items = iter(argv)
    for item in items:
        name, _, inline = item.partition("=")
        if item in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
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
    return (Path(db).absolute() if db else default_db()), wait, retry


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    number = 0
    while chunk := stream.readline(_READ_LIMIT):
        number += 1
        if chunk.endswith(b"\n"):
            chunk = chunk[:-1]
        elif len(chunk) == _READ_LIMIT:
            while (rest := stream.readline(_READ_LIMIT)) and not rest.endswith(b"\n"):
                pass
        if chunk and not chunk.startswith(b"#"):
            yield number, chunk


def _request_id(line: bytes) -> str:
    """The line's requestId; a line that cannot be a request is refused here, not sent."""
    if len(line) >= _READ_LIMIT - 1:
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
        self.client: HostClient | None = None
        self.reached = False
        """Whether a host has answered yet: before, pwf call waits --wait; after, --retry-for."""

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
                raise ValueError(
                    "the host closed the connection on this line: it is not a canonical request"
                )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def main(argv: list[str] | None = None) -> int:
    """Run ``pwf call`` with ``argv`` (the arguments after ``call``); its exit code."""
    try:
        db, wait, retry_for = _options(sys.argv[2:] if argv is None else argv)
    except _Usage as error:
        sys.stderr.write(f"{USAGE.splitlines()[0]}\nError: {error}\n")
        return 2
    caller = _Caller(socket_path(db), wait, retry_for)
    out = sys.stdout.buffer
    refused = False
    try:
        for number, line in _lines(sys.stdin.buffer):
            try:
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
            waited = f" after waiting {wait:g} s" if wait else ""
            sys.stderr.write(
                f"Error: no pwf host is running at {caller.path}{waited};"
                f" start one with: pwf serve --db {db} (or pass --wait SECONDS to wait for it)\n"
            )
        return 3
    except HelloError as error:
        sys.stderr.write(f"Error: {error}\n")
        return 3
    finally:
        caller.close()
    return 2 if refused else 0
