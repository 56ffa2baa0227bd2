"""The command line (click); the only room that configures logging and maps errors to exit codes.

Exit codes (ADR 0006): 0 ok; 1 differences found (``verify``, ``diff``);
2 usage or bad input; 3 and up, other failures.  Every error is one line on
stderr, never a traceback.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

import click

from pwf.cli._logging import configure_logging
from pwf.errors import PwfError

__all__ = ["cli", "main"]


class PwfGroup(click.Group):
    """A group that turns pwf's errors into one clear line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:  # noqa: ANN401 - click's own signature
        """Run the subcommand, translating errors at the edge."""
        try:
            return super().invoke(ctx)
        except PwfError as error:
            raise _failure(str(error), error.exit_code) from None
        except sqlite3.Error as error:
            raise _failure(f"database error: {error}", 3) from None
        except OSError as error:
            raise _failure(
                f"{error.strerror or error}: {error.filename or ''}".rstrip(": "), 3
            ) from None


class _Failure(click.ClickException):
    """One line on stderr with pwf's exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(" ".join(message.split()))
        self.code = code

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        """The exit code of the error (ADR 0006)."""
        return self.code


def _failure(message: str, code: int) -> click.ClickException:
    return _Failure(message, code)


@click.group(cls=PwfGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="Log more (repeat for debug).")
@click.version_option(package_name="pwf")
def cli(verbose: int) -> None:
    """Pwf: an event-sourced host state for agent workflows.

    Every command appends canonical, hash-chained events to a log; the
    tables people query are projections of that log.
    """
    configure_logging(verbose)


def _register() -> None:
    from pwf.cli import (  # noqa: PLC0415 - commands register after the group exists
        dev,
        diff,
        explain,
        init,
        log,
        query,
        replay,
        request,
        session,
        state,
        worker,
    )

    cli.add_command(init.init)
    cli.add_command(request.request)
    cli.add_command(worker.worker)
    cli.add_command(query.query)
    cli.add_command(session.session)
    cli.add_command(state.state)
    cli.add_command(log.log)
    cli.add_command(dev.dev)
    cli.add_command(diff.diff)
    cli.add_command(diff.digest)
    log.log.add_command(diff.log_diff)
    cli.add_command(replay.replay_command)
    cli.add_command(replay.rebuild_command)
    cli.add_command(replay.verify_command)
    cli.add_command(explain.explain)


_register()


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli.main(prog_name="pwf"))
