"""The command line (click); the only room that configures logging and maps errors to exit codes.

Exit codes (ADR 0006): 0 ok; 1 differences found (``verify``, ``diff``);
2 usage or bad input; 3 and up, other failures.  Every error is one line on
stderr, never a traceback.

Verbs are imported only when invoked (ADR 0031): :data:`VERBS` names each
verb's module, its attribute and its short help, so ``pwf --help`` lists
every verb without importing any of them.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import click

from pwf import DISTRIBUTION, __version__, logs
from pwf.config import ENVIRONMENT
from pwf.errors import PwfError, os_error_text

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["VERBS", "Verb", "cli", "main", "verdict"]

VERDICT: Final = "pwf.verdict"
"""Key in the root context's ``meta`` of the exit code a verb's report stands for."""


class Verb(NamedTuple):
    """Where a verb lives, and the short help ``pwf --help`` shows for it."""

    module: str
    attribute: str
    short_help: str


VERBS: Final[dict[str, Verb]] = {
    "completion": Verb(
        "pwf.cli.completion",
        "completion",
        "Print the completion script for SHELL; load it from your shell's start-up file.",
    ),
    "dev": Verb("pwf.cli.dev", "dev", "Developer tasks."),
    "diff": Verb(
        "pwf.cli.diff",
        "diff",
        "Compare the projections of two databases row by row (exit 1 when they differ).",
    ),
    "call": Verb("pwf.cli.call", "call", "Send request lines on stdin to the running host."),
    "digest": Verb(
        "pwf.cli.diff",
        "digest",
        "Print one SHA-256 per projection table and one over all, for comparing machines.",
    ),
    "explain": Verb(
        "pwf.cli.explain",
        "explain",
        "Explain an interaction or a run: its timeline, its state and a diagnosis.",
    ),
    "init": Verb(
        "pwf.cli.init", "init", "Create a state database (log and projections in one file)."
    ),
    "log": Verb("pwf.cli.log", "log", "Inspect, verify, export and import the event log."),
    "proof": Verb("pwf.cli.audit", "proof", "Check proofs and receipts offline, with no database."),
    "query": Verb(
        "pwf.cli.query",
        "query",
        "Read the projections: runs, interactions, workflow messages and model turns.",
    ),
    "rebuild": Verb(
        "pwf.cli.replay", "rebuild_command", "Rebuild every projection from the log, atomically."
    ),
    "replay": Verb(
        "pwf.cli.replay",
        "replay_command",
        "Fold the log up to a point into a new database with every projection.",
    ),
    "request": Verb("pwf.cli.request", "request", "Run client-protocol requests read from stdin."),
    "schema": Verb(
        "pwf.cli.schema",
        "schema",
        "Print the JSON Schema of OPERATION's payload and of its receipt.",
    ),
    "serve": Verb(
        "pwf.cli.serve",
        "serve",
        "Serve the database to clients over host/host.sock until stopped.",
    ),
    "session": Verb(
        "pwf.cli.session",
        "session",
        "Session coordinators and interaction deadlines, in direct mode.",
    ),
    "state": Verb(
        "pwf.cli.state",
        "state",
        "Maintenance of the state database, recorded like the original's commands.",
    ),
    "status": Verb(
        "pwf.cli.status",
        "status",
        "Show counts, the runs not ended and interactions not consumed, and contradictions.",
    ),
    "verify": Verb(
        "pwf.cli.replay",
        "verify_command",
        "Verify the hash chain, then that the live projections equal a rebuild of the log.",
    ),
    "web": Verb(
        "pwf.cli.web",
        "web",
        "Serve a read-only web view of the database: overview, runs, interactions, log.",
    ),
    "witness": Verb(
        "pwf.cli.witness",
        "witness",
        "Cosign a log's checkpoints only when each is consistent with the last one.",
    ),
    "worker": Verb("pwf.cli.worker", "worker", "Run worker-protocol messages read from stdin."),
}
"""Every top-level verb; ``tests/cli/test_startup.py`` checks each short help
against the command's own docstring."""


class PwfGroup(click.Group):
    """A group that turns pwf's errors into one clear line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:  # noqa: ANN401 - click's own signature
        """Run the subcommand, translating errors at the edge."""
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout()
            raise click.exceptions.Exit(ctx.meta.get(VERDICT, 0)) from None
        except PwfError as error:
            raise _failure(str(error), error.exit_code) from None
        except sqlite3.Error as error:
            raise _failure(f"database error: {error}{_stale_hint(ctx)}", 3) from None
        except OSError as error:
            raise _failure(os_error_text(error), 3) from None


def _stale_hint(ctx: click.Context) -> str:
    """`` (…: run `pwf rebuild`)`` when the verb's database holds a projection of another version.

    Read only on this error's path, so a verb that succeeds never imports
    the read model for it; any fault of its own gives no hint.
    """
    from pwf.cli._options import DATABASE  # noqa: PLC0415 - only on this error

    path = ctx.meta.get(DATABASE)
    if path is None:
        return ""
    try:
        from pwf.readmodel import stale_projections  # noqa: PLC0415 - only on this error

        connection = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
        try:
            stale = stale_projections(connection)
        finally:
            connection.close()
    except (sqlite3.Error, OSError, ValueError):
        return ""
    return f" ({'; '.join(stale)}: run `pwf rebuild`)" if stale else ""


def verdict(code: int) -> None:
    """Declare the exit code the report a verb is about to print stands for (ADR 0079).

    ``diff``, ``log diff``, ``verify``, ``log verify`` and ``status`` decide
    before they print; when their reader closes stdout (``pwf diff a b |
    head``) they still exit with this code, so ``pipefail`` keeps the verdict.
    """
    click.get_current_context().find_root().meta[VERDICT] = code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: its reader went away, so nothing more can be said to it.

    A closed pipe (``pwf log show | head``) is a normal end, not an error: the
    verb stops, and the flush at exit must not fail again on the closed pipe.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


class LazyGroup(PwfGroup):
    """The top-level group: a verb's module is imported when the verb is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every verb, sorted, without importing any."""
        return sorted({*VERBS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import the verb's module and return its command; None for an unknown verb."""
        verb = VERBS.get(cmd_name)
        if verb is None:
            return super().get_command(ctx, cmd_name)
        # __import__ rather than importlib: `python -X importtime` then times the verb's module.
        command = getattr(__import__(verb.module, fromlist=[verb.attribute]), verb.attribute)
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Resolve a verb; an unknown one gets click's "Did you mean" from every verb's name.

        click draws its suggestions from ``self.commands``, which the lazy
        group leaves empty, so the suggestion is made here from :data:`VERBS`.
        """
        name = click.utils.make_str(args[0]) if args else ""
        known = not args or name.startswith("-") or self.get_command(ctx, name) is not None
        if not known and not ctx.resilient_parsing:
            raise click.exceptions.NoSuchCommand(
                name, possibilities=self.list_commands(ctx), ctx=ctx
            )
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the verbs with their stored short help, as click would list loaded ones."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows: Sequence[tuple[str, str]] = [
            (name, _short_help(ctx, self, name, limit)) for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _short_help(ctx: click.Context, group: click.Group, name: str, limit: int) -> str:
    verb = VERBS.get(name)
    if verb is not None:
        return click.Command(name, help=verb.short_help).get_short_help_str(limit)
    command = click.Group.get_command(group, ctx, name)
    return "" if command is None else command.get_short_help_str(limit)


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


def _environment_help() -> str:
    """The ``pwf --help`` epilog: every setting read from the environment, with its default."""
    width = max(len(name) for name, _, _ in ENVIRONMENT)
    lines = [
        f"  {name:<{width}}  {text} (default: {default})" for name, text, default in ENVIRONMENT
    ]
    return "\b\nEnvironment:\n" + "\n".join(lines)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_environment_help(),
)
@click.option("-v", "--verbose", count=True, help="Log more (repeat for debug).")
@click.version_option(version=__version__, package_name=DISTRIBUTION)
def cli(verbose: int) -> None:
    """Pwf: an event-sourced host state for agent workflows.

    Every command appends canonical, hash-chained events to a log; the
    tables people query are projections of that log.
    """
    logs.set_verbosity(verbose)


def main() -> None:
    """Console-script entry point; a closed stdout ends quietly with exit 0."""
    try:
        cli.main(prog_name="pwf")
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        code = 0
    sys.exit(code)
