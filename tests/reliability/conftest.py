"""The reliability suite's figures: collected while it runs, printed, and written down.

Each test adds what it did to one session-wide :class:`Figures` (the
``figures`` fixture).  At the end of the session the figures are printed in
the terminal summary.  Only ``make reliability-report`` (which sets
:data:`REPORT`) writes them to ``docs/reliability.md``, and only when every
part of the suite ran, so the page always describes one whole run and
``make test`` never rewrites a tracked file.  The page's text is fixed; only
the figures change from run to run.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from _pytest.terminal import TerminalReporter

COMMAND: Final = "make reliability-report"
DOC: Final = Path("docs") / "reliability.md"
REPORT: Final = "PWF_RELIABILITY_REPORT"
"""Set to 1 (by ``make reliability-report``) to write :data:`DOC` at the end of a whole run."""


@dataclass(frozen=True)
class Part:
    """One part of the suite: its test module, what it proves, and the figures it counts."""

    module: str
    title: str
    proves: str
    names: tuple[str, ...]


PARTS: Final = (
    Part(
        "test_crash",
        "Crash",
        "A writer process drives runs through the real command path (client requests and worker "
        "messages: start, launch, ready, node, interaction, submit, pause, resume, cancel, "
        "finish, retries) and prints one flushed line per answer whose transaction committed. The"
        " test kills it with SIGKILL after a random delay, again and again on the same database "
        "file. After every kill the hash chain verifies, every acknowledged request id, "
        "idempotency key, worker message and launch is in the log, and the live projections equal"
        " a rebuild of the log (`pwf verify`). Then `pwf state prune --apply` is killed at random"
        " points of its backup, its image and its install, each time on a fresh copy of a filled "
        "database: every copy verifies, equals a rebuild, and holds either its old log or the "
        "pruned log (every seq kept) whose backup proves each removed body (`pwf log verify "
        "--backup`). `pwf rebuild` is killed the same way on copies whose projections were edited"
        " by hand: each keeps the log, verifies, and holds the edited projections byte for byte "
        "or projections equal to a rebuild, never half swapped; the scratch files a killed "
        "rebuild leaves are deleted by the next one once nobody holds them. `pwf replay` killed "
        "the same way leaves no output file or a whole one that verifies and equals a rebuild of "
        "its log.",
        (
            "kills survived",
            "batches acknowledged",
            "events lost",
            "events in the log",
            "seed",
            "prune kills survived",
            "prunes cut before their commit (log unchanged)",
            "prunes cut after their commit (log pruned)",
            "rebuild kills survived",
            "rebuilds cut before their commit (projections as they were)",
            "rebuilds cut after their commit (projections rebuilt)",
            "scratch files left by killed folds, then swept",
            "replay kills survived",
            "replays cut before their rename (no file)",
            "replays cut after their rename (whole file)",
        ),
    ),
    Part(
        "test_storage_faults",
        "Storage faults",
        "`pwf request` runs with a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) and is fed"
        " requests until a write fails, as on a full disk; then against a read-only database"
        " file and a read-only directory (as root, with the capabilities that bypass file"
        " permissions dropped); then while another connection holds the write lock past the"
        " busy timeout. Each time: one clear line on stderr, no traceback, a non-zero exit"
        " code, a log that verifies with projections equal to a rebuild, and nothing"
        " half-written (the head is the last acknowledged batch, or the log did not move).",
        ("faults injected", "disk-full failures", "requests acknowledged before a fault"),
    ),
    Part(
        "test_fuzz",
        "Bad input",
        "Hypothesis sends arbitrary bytes and mutated valid requests and worker messages"
        " through `pwf request` and `pwf worker` in process, and a smaller batch through the"
        " real subprocess CLI; a fixed corpus adds hostile lines (1e400, 10 000-deep nesting,"
        " NUL, invalid UTF-8, duplicate keys, lines of 1 MiB - 1, 1 MiB and 1 MiB + 1 bytes,"
        " unknown members, SQL-looking ids, a BOM, lone surrogates, wrong types, empty"
        " lines). Every line gets one response line or one `line N: why` error line, never a"
        " traceback, and a refused line leaves the log's head and length unchanged.",
        ("inputs tried", "inputs through the subprocess CLI", "refused", "answered"),
    ),
    Part(
        "test_races",
        "Concurrency",
        "Processes released together send one (clientId, idempotencyKey) with different"
        " request ids: exactly one `accepted`, the rest `adopted`, one run reserved. Two"
        " writers interleave distinct commands: a gapless log whose chain verifies and whose"
        " rebuild equals the live projections. `pwf state backup` runs while a writer"
        " writes: every copy verifies on its own and is exactly the live log up to a seq"
        " before its own record. A writer whose busy timeout is 250 ms keeps writing"
        " through two backups of a log of some 8 000 events (the copy holds no write"
        " lock), and one with the default timeout through a prune of it."
        " `pwf state prune --apply` runs twice while a writer writes, each time removing"
        " the runs finished a second before the newest event: every acknowledged answer is"
        " in the live log or, for a pruned run, in a backup; the log verifies and each"
        " backup proves the bodies the prune after it took.",
        (
            "races run",
            "processes raced",
            "batches interleaved",
            "backups checked",
            "prunes applied",
            "runs pruned",
        ),
    ),
)


@dataclass(repr=False)
class Figures:
    """Counts per part, in the fixed order of :data:`PARTS`; unknown names are a bug."""

    values: dict[str, dict[str, int]] = field(
        default_factory=lambda: {part.module: dict.fromkeys(part.names, 0) for part in PARTS}
    )
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    ran: set[str] = field(default_factory=set)
    outcomes: Counter[str] = field(default_factory=Counter)
    readings: set[tuple[str, str]] = field(default_factory=set)
    """(module, name) of the figures that are readings, not counts (see :meth:`set`)."""

    def __repr__(self) -> str:
        """Short, for failure reports that show a test's arguments."""
        return f"Figures(parts ran: {sorted(self.ran)})"

    def add(self, module: str, name: str, amount: int = 1) -> None:
        """Count ``amount`` more of a figure of the part in ``module``."""
        self.values[module][name] += amount

    def set(self, module: str, name: str, value: int) -> None:
        """Set a figure that is a reading, not a count (a seed, a log's length)."""
        self.values[module][name] = value
        self.readings.add((module, name))

    def merge(self, values: dict[str, dict[str, int]], readings: list[list[str]]) -> None:
        """Take in another process's figures: counts add up, readings keep the largest."""
        kept = {(module, name) for module, name in readings}
        self.readings |= kept
        for module, figures in values.items():
            for name, value in figures.items():
                if (module, name) in kept:
                    self.values[module][name] = max(self.values[module][name], value)
                else:
                    self.values[module][name] += value


COLLECTOR: Final = pytest.StashKey["Collector"]()
WORKER_OUTPUT: Final = "pwf-reliability-figures"
"""The key of a pytest-xdist worker's figures in its ``workeroutput``."""


class Collector:
    """A plugin: keeps the figures, notes which parts ran, prints them and writes the page."""

    def __init__(self) -> None:
        """Nothing has run yet."""
        self.figures = Figures()
        self.written: str | None = None
        self.deselected = False

    @staticmethod
    def _part(location: str) -> str | None:
        """The part a test belongs to, from its file; None for tests outside this suite."""
        path = Path(location)
        ours = {part.module for part in PARTS}
        return path.stem if path.parent.name == "reliability" and path.stem in ours else None

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """A run with some of this suite deselected (``-k``, ``-m``) does not write the page."""
        if any(self._part(item.location[0]) is not None for item in items):
            self.deselected = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Note which parts ran, their outcomes and how long their tests took."""
        module = self._part(report.location[0])
        if module is None:
            return
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.figures.ran.add(module)
            known = report.outcome == "skipped" and hasattr(report, "wasxfail")
            self.figures.outcomes["xfailed" if known else report.outcome] += 1
        self.figures.seconds[module] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the page when all of the suite ran and the session was not interrupted.

        Under pytest-xdist a worker only hands its figures to the controller
        (``workeroutput``), which adds them up and writes the page once.
        """
        output = getattr(session.config, "workeroutput", None)
        if output is not None:
            figures = self.figures
            output[WORKER_OUTPUT] = {
                "values": figures.values,
                "readings": sorted(figures.readings),
                "deselected": self.deselected,
            }
            return
        complete = {part.module for part in PARTS} <= self.figures.ran and not self.deselected
        if (
            os.environ.get(REPORT) != "1"
            or not complete
            or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        ):
            return
        path = session.config.rootpath / DOC
        try:
            path.write_text(render(self.figures), encoding="utf-8")
        except OSError as error:
            self.written = f"could not write {DOC}: {error.strerror}"
        else:
            self.written = f"wrote {DOC}"

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        """pytest-xdist: a worker finished; add its figures to the session's."""
        del error
        output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
        if output is None:
            return
        self.figures.merge(output["values"], output["readings"])
        self.deselected = self.deselected or bool(output["deselected"])

    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        """Print the figures of the parts that ran."""
        figures = self.figures
        if not figures.ran:
            return
        terminalreporter.write_sep("-", "reliability figures")
        for part in PARTS:
            if part.module in figures.ran:
                shown = ", ".join(
                    f"{name} {value}" for name, value in figures.values[part.module].items()
                )
                seconds = round(figures.seconds[part.module])
                terminalreporter.write_line(f"{part.title}: {shown} ({seconds} s)")
        if self.written is not None:
            terminalreporter.write_line(self.written)


def pytest_configure(config: pytest.Config) -> None:
    """One collector per session, registered as a plugin so it sees the session's end."""
    collector = Collector()
    config.stash[COLLECTOR] = collector
    config.pluginmanager.register(collector, "pwf-reliability-figures")


@pytest.fixture(scope="session")
def figures(pytestconfig: pytest.Config) -> Figures:
    """The session's figures, for tests to add to."""
    return pytestconfig.stash[COLLECTOR].figures


def render(figures: Figures) -> str:
    """The Markdown page: fixed text, then each part's figures of this run."""
    result = ", ".join(
        f"{figures.outcomes[outcome]} {outcome}"
        for outcome in ("passed", "failed", "skipped", "xfailed")
    )
    lines = [
        "# Reliability",
        "",
        (
            "`tests/reliability/` attacks the store the way production will: processes killed"
            " mid-write, full and read-only disks, a held write lock, hostile input and racing"
            " writers. It runs in CI as part of plain `pytest`, kept under three minutes on two"
            " cores; `make reliability-report` runs it and rewrites this page, figures"
            " included, when all of its parts ran (`make test` never rewrites it)."
        ),
        "",
        "The figures below come from the last such run, made with:",
        "",
        "```sh",
        COMMAND,
        "```",
        "",
        (
            f"Result: {result} (an xfailed test is a known bug, marked where it is tested)."
            " `PWF_RELIABILITY_KILLS` sets the number of kills and `PWF_RELIABILITY_SEED` the"
            " seed of their random delays."
        ),
    ]
    for part in PARTS:
        lines += [
            "",
            f"## {part.title}",
            "",
            part.proves,
            "",
            "| figure | value |",
            "| --- | ---: |",
        ]
        lines += [f"| {name} | {value} |" for name, value in figures.values[part.module].items()]
        lines.append(f"| seconds | {round(figures.seconds[part.module])} |")
    return "\n".join(lines) + "\n"
