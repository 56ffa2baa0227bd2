"""Canonical JSON encode + SHA-256 per second on one core.

Measures what sealing an event costs in :mod:`pwf.canonical`, each case as
``hashlib.sha256(encode(value)).hexdigest()`` in a tight loop:

(a) pwf's fast path on a typical event envelope *Struct*: a
    ``pwf.events._base._Sealing`` (the envelope as hashed, before
    ``contentHash`` is added) holding a ``CommandRecorded`` and a ``Cause``;
(a2) the same on the smallest realistic envelope (no cause);
(b) pwf's fast path on the same value as plain dicts and lists;
(c) pwf's fast path on the dict with a double in it (a receipt member),
    which msgspec writes as ``Number::toString`` does;
(c2) pwf's exact slow path: the same dict with ``1e21``, which msgspec
    writes otherwise;
(d) the ceiling: msgspec ``Encoder(order="sorted")`` on the Struct, no checks;
(e) the pure-Python ``rfc8785`` package on the dict;
(f) ``parse_line`` of the float dict's canonical line, as a deep verify
    checks a stored event: proven by msgspec (ADR 0063);
(g) the same with the proof off, the exact check alone: decode,
    re-encode, compare (no SHA-256 in these two).

The ratio of (a) to the target of 400 000/s is printed.  The smallest
envelope the schema allows is well above 300 bytes (a fingerprint and a
prevHash are two 64-digit hex strings), so the sizes are printed too.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if __package__ in {None, ""}:  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
import rfc8785
from bench.harness import Rates, calibrate, fmt_rate, timed_rate
from bench.workload import compact_batches

from pwf import canonical
from pwf.events._base import SCHEMA, _Sealing

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["TARGET", "main", "run"]

TARGET: Final = 400_000
"""Encode + SHA-256 operations per second wanted from the fast path on one core."""

_SEQ: Final = 1234


def typical_draft(*, with_cause: bool = True) -> _Sealing:
    """A mid-log envelope as :func:`pwf.events.seal` hashes it (no ``contentHash`` yet)."""
    event, at, actor, cause = compact_batches(1, seed=11)[0]
    return _Sealing(
        actor=actor,
        at=at,
        batch=_SEQ - 40,
        data=event[0],
        event_id=f"evt-{_SEQ}",
        prev_hash=canonical.text_hex_digest("the event before"),
        schema=SCHEMA,
        seq=_SEQ,
        type=event[0].TAG,
        cause=cause if with_cause else None,
    )


def float_dict(plain: dict[str, Any], seconds: float = 12.375) -> dict[str, Any]:
    """The plain dict with a receipt that holds a double."""
    data = dict(plain["data"])
    data["receipt"] = {
        "detail": "step plan finished in 2 attempts",
        "elapsedSeconds": seconds,
        "revision": data["revision"],
        "runId": data["runId"],
        "status": "running",
    }
    return {**plain, "data": data}


def _loop(encode: Callable[[Any], bytes], value: object) -> Callable[[int], None]:
    sha256 = hashlib.sha256

    def loop(count: int) -> None:
        for _ in itertools.repeat(None, count):
            sha256(encode(value)).hexdigest()

    return loop


def _check_paths(
    struct: _Sealing, plain: dict[str, Any], double: dict[str, Any], slow: dict[str, Any]
) -> None:
    """Make sure each case takes the path its label names and writes the same bytes."""
    # The bench looks inside canonical to prove which path it is timing.
    assert canonical._struct_plain(struct), "the Struct must take the fast path"  # noqa: SLF001
    assert canonical._plain(plain), "the dict must take the fast path"  # noqa: SLF001
    assert canonical._plain(double), "the double dict must take the fast path"  # noqa: SLF001
    assert not canonical._plain(slow), "the 1e21 dict must take the slow path"  # noqa: SLF001
    line = canonical.encode(double)
    assert canonical._proven(line) is not canonical.MISSING, "the line must be proven"  # noqa: SLF001
    assert canonical.encode(struct) == canonical.encode(plain)
    assert canonical.encode(plain) == rfc8785.dumps(plain)
    assert canonical.encode(double) == rfc8785.dumps(double)
    assert canonical.encode(slow) == rfc8785.dumps(slow)


def _parse_loop(parse: Callable[[bytes], object], line: bytes) -> Callable[[int], None]:
    def loop(count: int) -> None:
        for _ in itertools.repeat(None, count):
            parse(line)

    return loop


def _exact_parse(line: bytes) -> object:
    """``parse_line`` with the proof off: the exact check alone (after the same UTF-8 check)."""
    return canonical._exact(line, line.decode())  # noqa: SLF001 - the path being compared


def run(rounds: int = 7, seconds: float = 0.2) -> list[str]:
    """Measure every case for ``rounds`` interleaved rounds; return the report lines."""
    struct = typical_draft()
    small = typical_draft(with_cause=False)
    plain: dict[str, Any] = msgspec.to_builtins(struct)
    double = float_dict(plain)
    slow = float_dict(plain, 1e21)
    _check_paths(struct, plain, double, slow)
    line = canonical.encode(double)
    ceiling = msgspec.json.Encoder(order="sorted").encode
    cases: list[tuple[str, str, Callable[[int], None]]] = [
        ("a", "pwf fast path, envelope Struct", _loop(canonical.encode, struct)),
        ("a2", "pwf fast path, minimal Struct", _loop(canonical.encode, small)),
        ("b", "pwf fast path, same as dict", _loop(canonical.encode, plain)),
        ("c", "pwf fast path, dict + double", _loop(canonical.encode, double)),
        ("c2", "pwf exact path, dict + 1e21", _loop(canonical.encode, slow)),
        ("d", "msgspec sorted (ceiling)", _loop(ceiling, struct)),
        ("e", "rfc8785.dumps (pure Python)", _loop(rfc8785.dumps, plain)),
        ("f", "parse_line, proven", _parse_loop(canonical.parse_line, line)),
        ("g", "parse_line, exact check", _parse_loop(_exact_parse, line)),
    ]
    sizes = {
        "a": len(canonical.encode(struct)),
        "a2": len(canonical.encode(small)),
        "b": len(canonical.encode(plain)),
        "c": len(canonical.encode(double)),
        "c2": len(canonical.encode(slow)),
        "d": len(ceiling(struct)),
        "e": len(rfc8785.dumps(plain)),
        "f": len(line),
        "g": len(line),
    }
    counts = [calibrate(loop, seconds) for _, _, loop in cases]
    rates = {key: Rates(()) for key, _, _ in cases}
    for _ in range(rounds):
        for (key, _, loop), count in zip(cases, counts, strict=True):
            rates[key] = rates[key].add(timed_rate(loop, count))

    fast = rates["a"].median
    notes = {
        "a": f"{fast / TARGET:.2f}x target ({fmt_rate(TARGET)}/s)",
        "a2": f"{rates['a2'].median / TARGET:.2f}x target",
        "b": f"{rates['b'].median / TARGET:.2f}x target",
        "c": f"{rates['c'].median / fast:.2f}x (a)",
        "c2": f"{rates['c2'].median / fast:.2f}x (a)",
        "f": f"{rates['f'].median / rates['g'].median:.2f}x (g)",
        "g": "",
        "d": f"(a) is {fast / rates['d'].median:.2f} of ceiling",
        "e": f"(a) is {fast / rates['e'].median:.1f}x rfc8785",
    }
    lines = [f"canonical encode + SHA-256, one core: ops/s, median [min-max] of {rounds} rounds"]
    for key, label, _ in cases:
        name = f"({key}) {label} ({sizes[key]} B)"
        lines.append(f"  {name:<43} {rates[key].summary():<30} {notes[key]}")
    return lines


def main() -> None:
    """Run this benchmark alone."""
    parser = argparse.ArgumentParser(description="canonical encode + SHA-256 per second")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.2, help="length of one round")
    args = parser.parse_args()
    print("\n".join(run(args.rounds, args.seconds)))


if __name__ == "__main__":
    main()
