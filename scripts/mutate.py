"""Mutation testing of the code where a small slip does the most harm (ADR 0046).

``make mutate`` runs mutmut once per target, each in its own scratch folder
under ``.mutate/`` with a configuration that names the target's files, the
functions to mutate and a fast selection of the tests written for them, then
prints the surviving mutants.  It is a habit, not a gate: it always exits 0
once the runs are done, and ``make check`` does not run it.

    python scripts/mutate.py                 # every target
    python scripts/mutate.py canonical chain # some of them
    python scripts/mutate.py --list          # what the targets are

Each mutant is cheap to judge: mutmut records which of the target's tests
reach each mutated function and runs only those, stopping at the first that
fails; each target's selection leaves out the slow tests that add nothing a
fast one does not (property tests, PostgreSQL twins, byte-by-byte sweeps).
mutmut works with ``--jobs`` children (2 by default) and a timeout of
``--timeout-multiplier`` times a test's clean duration plus
``--timeout-constant`` seconds, and runs to the end
unless ``--budget`` seconds are given.  A run's results stay in
``.mutate/<target>/mutants`` so a second run only tests the mutants whose code
changed; ``--fresh`` starts over, and ``--again`` judges once more only the
mutants the last run did not kill (after tests were added to kill them).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
WORK: Final = ROOT / ".mutate"
MUTMUT: Final = Path(sys.executable).parent / "mutmut"
SCRIPTS: Final = ROOT / "scripts"
MEMORY: Final = Path("/dev/shm")  # noqa: S108 - a folder of our own is made in it
"""A memory file system for the runs' scratch files, where the machine has one."""
SQLITE_ONLY: Final = "not postgresql"
"""The PostgreSQL twins of the integration tests add nothing here and cost a server each."""
STATUSES: Final = (
    "killed",
    "survived",
    "timeout",
    "suspicious",
    "no tests",
    "not checked",
    "caught by type check",
    "skipped",
    "segfault",
    "check was interrupted by user",
)


@dataclasses.dataclass(frozen=True)
class Target:
    """What one run mutates and which tests judge it."""

    about: str
    files: tuple[str, ...]
    """Source files (under ``src/``) mutmut copies and mutates."""
    names: tuple[str, ...]
    """Mutant name globs: the functions of those files that are mutated."""
    tests: tuple[str, ...]
    """Test files or node ids; mutmut runs, per mutant, those of them that reach its function."""
    leave_out: str = ""
    """A ``pytest -k`` expression for the slow tests of those files that are not run."""
    plugins: tuple[str, ...] = ()
    """Modules of ``scripts/`` loaded as pytest plugins (``-p``) in every run of the target."""


TARGETS: Final = {
    "canonical": Target(
        about="canonical JSON: key order, number and string forms, hashing (DOMAIN §3)",
        files=("src/pwf/canonical.py",),
        names=("pwf.canonical.*",),
        tests=(
            "tests/unit/test_canonical.py",
            "tests/unit/test_canonical_golden.py",
            "tests/unit/test_conformance_golden.py",
            "tests/unit/test_canonical_struct_plans.py",
        ),
    ),
    "chain": Target(
        about="the hash chain: the link rule and the verifying walk (DOMAIN §2.1)",
        files=("src/pwf/store/chainwalk.py", "src/pwf/store/__init__.py"),
        # Every function of both files, so that a run leaves none unchecked: how many processes
        # walk a long log and the bodies of the store's protocols are judged like the rest.
        names=("pwf.store.chainwalk.*", "pwf.store.x*"),
        tests=(
            "tests/integration/test_chainwalk.py",
            "tests/integration/test_store.py",
        ),
        # The deep damage matrix split three ways repeats what one and two ranges show and
        # cost a third of every chain mutant (ADR 0056); the deep head and origin keep it.
        leave_out="every_byte_at_the_boundary or (TestDeep and -3])",
        plugins=("mutate_in_process",),
    ),
    "idempotency": Target(
        about="adopt or execute: the replay lookup and the recording of an outcome (DOMAIN §7.2)",
        files=("src/pwf/host/_recording.py",),
        names=("pwf.host._recording.*",),
        tests=(
            "tests/integration/test_scenarios_b.py",
            "tests/integration/test_workflow_source.py",
            "tests/integration/test_stopping_host_gate.py",
            # A served session command from a replaced coordinator's connection (DOMAIN §5.13):
            # without it the context could lose its connection unseen (ADR 0100).
            "tests/integration/test_served_fencing.py",
        ),
        leave_out="racing_processes",
    ),
    "deadlines": Target(
        about="deadline arithmetic: SHIFT, turn start, resume and expiry (DOMAIN §10)",
        files=("src/pwf/commands/deadlines.py", "src/pwf/commands/expiry.py"),
        names=("pwf.commands.deadlines.*", "pwf.commands.expiry.*"),
        tests=(
            "tests/integration/test_scenarios_e.py",
            "tests/integration/test_scenarios_f.py",
            "tests/integration/test_expiry_skips.py",
        ),
    ),
}


def _toml(value: object) -> str:
    """A TOML value: JSON's strings, numbers, booleans and arrays are valid TOML."""
    return json.dumps(value, ensure_ascii=False)


def _leave_out(target: Target) -> str:
    """The ``-k`` expression of the tests a target's run leaves out."""
    if not target.leave_out:
        return SQLITE_ONLY
    return f"{SQLITE_ONLY} and not ({target.leave_out})"


def _plugin_args(target: Target) -> list[str]:
    """The ``-p`` options that load a target's plugins in every pytest run of mutmut."""
    return [option for plugin in target.plugins for option in ("-p", plugin)]


def _config(target: Target, multiplier: float, constant: float) -> str:
    """The scratch folder's pyproject.toml: the project's pytest settings and the target's run."""
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{key} = {_toml(value)}" for key, value in pytest_options["ini_options"].items()]
    lines += [
        "",
        "[tool.mutmut]",
        f"source_paths = {_toml(['src'])}",
        f"only_mutate = {_toml(list(target.files))}",
        f"pytest_add_cli_args_test_selection = {_toml([*target.tests, '-k', _leave_out(target)])}",
        f"pytest_add_cli_args = {_toml(_plugin_args(target))}",
        f"timeout_multiplier = {_toml(multiplier)}",
        f"timeout_constant = {_toml(constant)}",
        "use_git_change_detection = false",
    ]
    return "\n".join(lines) + "\n"


def _prepare(
    name: str, target: Target, multiplier: float, constant: float = 30.0, *, fresh: bool
) -> Path:
    """The target's scratch folder, with links to the sources and the tests."""
    folder = WORK / name
    if fresh and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for part in ("src", "tests"):
        link = folder / part
        if not link.exists():
            link.symlink_to(ROOT / part, target_is_directory=True)
    (folder / "pyproject.toml").write_text(_config(target, multiplier, constant), "utf-8")
    _drop_stale_copies(folder / "mutants", target)
    return folder


def _drop_stale_copies(mutants: Path, target: Target) -> None:
    """Forget mutmut's copies of the files it does not mutate once they differ from the sources.

    mutmut copies the whole source tree once and never refreshes a copy; the
    target's own files it tracks itself (so their results are kept).
    """
    for copy in mutants.glob("src/**/*.py"):
        relative = copy.relative_to(mutants)
        source = ROOT / relative
        if str(relative) in target.files:
            continue
        if not source.exists() or source.read_bytes() != copy.read_bytes():
            copy.unlink()


def _functions(path: Path) -> dict[str, str]:
    """The source of every top-level function of a mutated file, by name."""
    text = path.read_text("utf-8")
    tree = ast.parse(text)
    return {
        node.name: ast.get_source_segment(text, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


def _case_only(folder: Path, name: str, cache: dict[Path, dict[str, str]]) -> bool:
    """Whether a mutant only changes the letter case of a string (SQL text or a row key).

    SQLite reads keywords and names in any case and ``sqlite3.Row`` looks keys
    up in any case, so such a mutant of a query or a row read is equivalent;
    the list still names it, because the same change to an error text is not.
    """
    module, _, function = name.rpartition(".")
    base = folder / "mutants" / "src" / module.replace(".", "/")
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if not path.exists():
        return False
    if path not in cache:
        cache[path] = _functions(path)
    functions = cache[path]
    original = functions.get(function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
    mutant = functions.get(function)
    if original is None or mutant is None:
        return False
    mutant = mutant.replace(f"def {function}(", "def _(", 1)
    original = original.replace(f"def {function.rsplit('__mutmut_', 1)[0]}__mutmut_orig(", "def _(")
    return mutant != original and mutant.lower() == original.lower()


def _results(folder: Path) -> list[tuple[str, str]]:
    """Every mutant of the target's last run with its status, as ``mutmut results --all`` says."""
    done = subprocess.run(  # noqa: S603 - our own venv's mutmut
        [str(MUTMUT), "results", "--all", "true"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    pattern = re.compile(rf"\s*(\S+): ({'|'.join(STATUSES)})")
    matches = map(pattern.fullmatch, done.stdout.splitlines())
    return [(match[1], match[2]) for match in matches if match]


def _survivors(folder: Path, results: list[tuple[str, str]]) -> list[str]:
    """The mutants no test killed (and those that timed out), each with what kind it is."""
    found = []
    cache: dict[Path, dict[str, str]] = {}
    for name, status in results:
        if status in {"survived", "timeout", "suspicious", "no tests"}:
            case = ", letter case only" if _case_only(folder, name, cache) else ""
            found.append(f"{name} ({status}{case})")
    return found


def _counts(results: list[tuple[str, str]]) -> str:
    """How many mutants ended in each status, in a fixed order."""
    statuses = [status for _, status in results]
    shown = [f"{statuses.count(status)} {status}" for status in STATUSES if status in statuses]
    return f"{len(statuses)} mutants: " + ", ".join(shown)


def _environment() -> dict[str, str]:
    """The environment of mutmut's runs: the plugins of ``scripts/`` importable, scratch in memory.

    Every test makes a store in pytest's ``tmp_path``; on a disk each of its
    commits waits for ``fsync`` (the store's ``synchronous=FULL``), which
    costs a chain mutant more than its tests' work.  pytest makes its
    temporary folders under ``TMPDIR``, numbered so that mutmut's children do
    not share one, so ``TMPDIR`` points at a memory file system where there is one.
    """
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPTS), env.get("PYTHONPATH")]))
    if MEMORY.is_dir() and os.access(MEMORY, os.W_OK):
        scratch = MEMORY / f"pwf-mutate-{os.getuid()}"
        scratch.mkdir(exist_ok=True)
        env["TMPDIR"] = str(scratch)
    return env


def _run(name: str, args: argparse.Namespace) -> list[str]:
    target = TARGETS[name]
    folder = _prepare(
        name, target, args.timeout_multiplier, args.timeout_constant, fresh=args.fresh
    )
    print(f"== {name}: {target.about}", flush=True)
    env = _environment()
    names = list(target.names)
    if args.again:
        # Only the mutants the last run did not kill; mutmut collects the tests added since.
        names = [
            mutant
            for mutant, status in _results(folder)
            if status != "killed" and any(fnmatch.fnmatch(mutant, glob) for glob in target.names)
        ] or names
    command = [str(MUTMUT), "run", "--max-children", str(args.jobs), *names]
    try:
        subprocess.run(command, cwd=folder, env=env, check=False, timeout=args.budget)  # noqa: S603
    except subprocess.TimeoutExpired:
        print(f"   {name}: stopped after {args.budget} s; the results so far follow", flush=True)
    results = _results(folder)
    survivors = _survivors(folder, results)
    print(f"   {name}: {_counts(results)}", flush=True)
    return [f"{name}: {survivor}" for survivor in survivors]


def main() -> int:
    """Run the chosen targets and print every survivor; ``mutmut show NAME`` in its folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help=f"some of: {', '.join(TARGETS)} (all)")
    parser.add_argument("--list", action="store_true", help="list the targets and stop")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (2)")
    parser.add_argument("--timeout-multiplier", type=float, default=5.0)
    parser.add_argument(
        "--timeout-constant",
        type=float,
        default=30.0,
        help="seconds added to a mutant's test time before the multiplier (30: a loaded machine)",
    )
    parser.add_argument("--budget", type=int, default=None, help="seconds per target (no limit)")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results")
    parser.add_argument(
        "--again", action="store_true", help="judge again only what the last run did not kill"
    )
    args = parser.parse_args()
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}; the targets are {', '.join(TARGETS)}")
    if args.list:
        for name, target in TARGETS.items():
            print(f"{name}: {target.about}\n    {' '.join(target.files)}")
        return 0
    survivors: list[str] = []
    for name in args.targets or list(TARGETS):
        survivors += _run(name, args)
    print(f"\n{len(survivors)} surviving mutants (mutmut show NAME in .mutate/TARGET):")
    for survivor in survivors:
        print(f"  {survivor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
