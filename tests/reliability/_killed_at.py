"""Run ``pwf ARGS``, SIGKILLed at one step: ``python _killed_at.py TARGET N WHEN ARGS...``.

``TARGET`` is ``module:attribute`` (the attribute may be ``Class.method``).
The ``N``-th call of it kills the process, ``before`` it runs or ``after``
it returned, with SIGKILL, as a crash or an operator's ``kill -9`` would:
no handler, no cleanup.  Everything else runs as the real ``pwf`` does.
"""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
from typing import Any


def _arm(target: str, nth: int, when: str) -> None:
    module_name, _, path = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *outer, name = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = [0]

    @functools.wraps(original)
    def killing(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == nth and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if calls[0] == nth and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, killing)


def main(argv: list[str]) -> None:
    """Arm the kill, then hand over to ``pwf``."""
    target, nth, when, args = argv[1], int(argv[2]), argv[3], argv[4:]
    _arm(target, nth, when)
    sys.argv = ["pwf", *args]
    from pwf.cli import main as pwf  # noqa: PLC0415 - imported once the kill is armed

    pwf()


if __name__ == "__main__":
    main(sys.argv)
