"""What closes on leaving a ``with`` block; imports nothing of pwf.

Stores, the embedded API, the host client and a forked process each hold
one resource (a connection, a socket, a process) and free it in ``close``;
:class:`Closing` gives each the same context-manager protocol once, so a
``with`` block closes it however the block ends.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

__all__ = ["Closing"]


class Closing(ABC):
    """A holder of one resource: :meth:`close` frees it, and so does leaving a ``with``."""

    __slots__ = ()

    @abstractmethod
    def close(self) -> None:
        """Free the resource."""

    def __enter__(self) -> Self:
        """Use as a context manager that closes on exit."""
        return self

    def __exit__(self, *_: object) -> None:
        """Close on exit, whether the block returned or raised."""
        self.close()
