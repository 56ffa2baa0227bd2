"""Processor time per request of the served path outside the writer: framing, parsing, answering.

The event loop thread of ``pwf serve`` splits each chunk into frames
(:class:`~pwf.protocol.framing.FrameDecoder`), parses each request
(:func:`~pwf.protocol.client.parse_request`, the canonical check and the
fingerprint included), and frames each answer
(:func:`~pwf.protocol.client.encode_response`); a client of
:mod:`pwf.client` decodes that answer.  This times each step on the bench's
own ``run.start`` line and a typical accepted answer, as thread time (so the
machine's load matters less), the median of several repeats.  Beside it, the
answer encoded with the full read-back of its wire members that
``encode_response`` did before, measured in the same run.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_serve import _start

from pwf.client import _decode
from pwf.protocol._lines import encode_message
from pwf.protocol.client import (
    _DIALECT,
    ClientResponse,
    _read_response,
    encode_line,
    encode_response,
    parse_request,
)
from pwf.protocol.framing import FrameDecoder

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["main"]

CALLS: Final = 20_000
REPEATS: Final = 5


def _per_call(step: Callable[[], object]) -> float:
    """Median microseconds of thread time per call of ``step``."""
    times = []
    for _ in range(REPEATS):
        began = time.thread_time()
        for _ in range(CALLS):
            step()
        times.append((time.thread_time() - began) / CALLS * 1e6)
    return statistics.median(times)


def main() -> int:
    """Print each step's thread time per request."""
    line = _start(12_345, "c-1")
    request = parse_request(line)
    answer = ClientResponse(
        request_id=request.request_id,
        outcome="accepted",
        revision=1,
        receipt={"revision": 1, "runId": "run-12345", "status": "running"},
    )
    framed = encode_line(encode_response(answer))
    steps: dict[str, Callable[[], object]] = {
        "frame one request line": lambda: FrameDecoder().feed(line + b"\n"),
        "parse_request": lambda: parse_request(line),
        "encode_response + encode_line": lambda: encode_line(encode_response(answer)),
        "  the same with the full read-back": lambda: encode_line(
            encode_message(answer, _read_response, _DIALECT)
        ),
        "client: decode the answer": lambda: _decode(framed[:-1]),
    }
    for name, step in steps.items():
        print(f"{name:40} {_per_call(step):6.1f} us/request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
