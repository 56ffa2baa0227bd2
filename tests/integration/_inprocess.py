"""The chain walk's ranges walked in this process: what a forked range gives, without the fork.

:class:`pwf._process.Forked` runs one range of a split walk in a forked
process; forking a test process costs far more than walking seven events.
:func:`ranges_in_process` puts :class:`InProcess` in its place, which runs
the same function on the same range here and hands back its value, or its
failure as the :class:`~pwf._process.ForkedError` a fork reports, so the
split, the ranges and the joining of their parts are the code under test
(ADR 0049, ADR 0054).  Tests that walk every offset use it and still walk a
sample of the offsets with real forks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from unittest import mock

from pwf._process import ForkedError
from pwf.store import chainwalk

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Callable

__all__ = ["InProcess", "ranges_in_process"]


class InProcess:
    """What :class:`pwf._process.Forked` gives, computed here: the same function, range and part."""

    def __init__(self, target: Callable[..., object], *args: object) -> None:
        """Run ``target(*args)`` at once, keeping its value or its failure."""
        try:
            self._found: object = target(*args)
            self._failed: str | None = None
        except Exception as error:  # noqa: BLE001 - a forked process reports any failure
            self._failed = f"{type(error).__name__}: {error}"

    def result(self) -> object:
        """The value, or the failure as a fork reports it.

        Raises:
            ForkedError: the function raised.
        """
        if self._failed is not None:
            raise ForkedError(f"a forked process failed: {self._failed}")
        return self._found

    def close(self) -> None:
        """Nothing to stop."""


def ranges_in_process() -> contextlib.AbstractContextManager[object]:
    """The split walk's ranges walked one after the other here instead of in forks."""
    return mock.patch.object(chainwalk, "Forked", InProcess)
