"""The ``pwf`` console script: ``pwf call`` starts without the rest of the command line."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run ``pwf call`` on its own light path, every other command through click."""
    if sys.argv[1:2] == ["call"]:
        from pwf.callhost import main as call  # noqa: PLC0415 - the light path imports little

        sys.exit(call(sys.argv[2:]))
    from pwf.cli import main as cli  # noqa: PLC0415 - the full command line

    cli()
