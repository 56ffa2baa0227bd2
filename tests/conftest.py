"""Shared fixtures: a fresh SQLite store and realistic command events to fill it with.

Helpers are handed out as fixtures (never imported from this module), so test
modules stay independent of how pytest puts ``tests/`` on ``sys.path``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import itertools
import json
import os
import shutil
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pwf import canonical
from pwf.events import Actor, Cause, CommandRecorded, Outcome, Sealed
from pwf.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from tests._cputime import VARIABLE, measure
    from tests._pg import MISSING, Server, find_bin
else:
    from _cputime import VARIABLE, measure
    from _pg import MISSING, Server, find_bin

AT = 1_764_403_200_000
"""A fixed clock reading (ms since the epoch): time is an input."""

OPERATIONS = ("run.start", "interaction.submit", "run.status")

MakeCommand = Callable[..., CommandRecorded]
MakeCause = Callable[[CommandRecorded], Cause]
AppendBatches = Callable[..., list[list[Sealed]]]
Reseal = Callable[[dict[str, Any]], bytes]
Built = Callable[[str, Callable[["Path"], object]], "Path"]


def make_command(  # noqa: PLR0913 - one keyword per field a test may want to pin
    n: int,
    *,
    client_id: str = "client-a",
    run_id: str | None = None,
    request_id: str | None = None,
    idempotency_key: str | None = None,
    outcome: Outcome = "accepted",
) -> CommandRecorded:
    """A realistic ``command.recorded`` event: a receipt with floats, non-ASCII and nesting."""
    operation = OPERATIONS[n % len(OPERATIONS)]
    run = run_id if run_id is not None else f"run-{n % 3}"
    request = {"operation": operation, "runId": run, "inputs": {"prompt": f"step {n} \u2603"}}
    receipt = {
        "runId": run,
        "status": "running",
        "revision": n,
        "inputs": {"prompt": f"h\u00e9llo \U0001f600 #{n}", "temperature": 0.7, "tags": ["a", "b"]},
        "deadline": None,
        "score": 1.5e-7,
    }
    return CommandRecorded(
        request_id=request_id or f"req-{n}",
        client_id=client_id,
        operation=operation,
        idempotency_key=idempotency_key or f"idem-{n}",
        fingerprint=canonical.hex_digest(request),
        outcome=outcome,
        run_id=run,
        revision=n,
        receipt=canonical.raw(receipt),
        host_epoch=1,
    )


def make_cause(event: CommandRecorded) -> Cause:
    """The client request a command event answers."""
    return Cause(
        operation=event.operation,
        request_id=event.request_id,
        client_id=event.client_id,
        idempotency_key=event.idempotency_key,
        fingerprint=event.fingerprint,
    )


ACTOR = Actor(type="session", id="session-main")


def append_batches(
    store: SqliteStore, sizes: Sequence[int], *, start: int = 1, at: int = AT
) -> list[list[Sealed]]:
    """Append one batch per size; events are numbered from ``start`` so request ids differ."""
    batches: list[list[Sealed]] = []
    n = start
    for index, size in enumerate(sizes):
        events = [make_command(n + offset) for offset in range(size)]
        batches.append(
            store.append(events, at=at + index, actor=ACTOR, cause=make_cause(events[0]))
        )
        n += size
    return batches


def reseal(document: dict[str, Any]) -> bytes:
    """Canonical bytes of an event document with a freshly computed, matching contentHash."""
    draft = {key: value for key, value in document.items() if key != "contentHash"}
    draft["contentHash"] = hashlib.sha256(canonical.encode(draft)).hexdigest()
    return canonical.encode(draft)


def client_request_line(
    number: int,
    operation: str = "run.start",
    *,
    at: int | None = None,
    payload: object = None,
) -> bytes:
    """A canonical client request line about ``run-N`` (preceded by ``#at AT`` when given).

    ``run.start`` gets the ``builtin:echo`` payload with input ``{"n": N}`` and
    origin ``s-N`` and ids ``r-N`` / ``k-N``; other operations get ``payload``
    (``{}`` by default) and ids named after the operation.
    """
    if operation == "run.start":
        rid, key = f"r-{number}", f"k-{number}"
        payload = {
            "projectPath": "/p",
            "workflowName": "echo",
            "workflowSourceRef": "builtin:echo",
            "workflowSource": {"id": "echo", "kind": "builtin", "revision": "test"},
            "definitionDigest": "d1",
            "definitionSnapshot": {},
            "input": {"n": number},
            "originSessionId": f"s-{number}",
        }
    else:
        rid = key = f"{operation}-{number}"
    request = {
        "schema": "pi-workflows.client.v1",
        "type": "request",
        "requestId": rid,
        "clientId": "cli-A",
        "idempotencyKey": key,
        "operation": operation,
        "runId": f"run-{number}",
        "payload": {} if payload is None else payload,
    }
    clock = b"" if at is None else f"#at {at}\n".encode()
    return clock + canonical.encode(request) + b"\n"


@pytest.fixture(scope="session")
def client_line() -> Callable[..., bytes]:
    """Build client request lines about ``run-N`` (see :func:`client_request_line`)."""
    return client_request_line


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Deal the long tests out over the workers first, then all the others (ADR 0058).

    ``--dist worksteal`` (``make test``) hands each worker one contiguous
    share of this list and lets a worker that runs out take the back half of
    the longest queue.  So the tests ``tests/durations.json`` records as long
    (and those marked ``slow`` it does not know yet) go to the fronts of the
    shares, longest first, each to the share with the least so far; the
    other tests keep their collected order behind them.  Every test still
    runs, once.
    """
    items[:] = _arranged(items, _recorded(), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


DURATIONS = Path(__file__).with_name("durations.json")
"""Seconds the long tests took in a recorded run (``python tests/_cputime.py DIR --record``)."""
UNRECORDED_SLOW = 5.0
"""What a test marked ``slow`` that the file does not know yet is taken to cost."""


def _recorded() -> dict[str, float]:
    try:
        found: dict[str, float] = json.loads(DURATIONS.read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return {}
    return found


def _arranged(
    items: list[pytest.Item], recorded: dict[str, float], workers: int
) -> list[pytest.Item]:
    """The long tests spread over ``workers`` shares, longest first; the rest behind, in order."""

    def cost(item: pytest.Item) -> float:
        if item.nodeid in recorded:
            return recorded[item.nodeid]
        return UNRECORDED_SLOW if item.get_closest_marker("slow") else 0.0

    costs = {item.nodeid: cost(item) for item in items}
    long = sorted((item for item in items if costs[item.nodeid]), key=lambda i: -costs[i.nodeid])
    short = [item for item in items if not costs[item.nodeid]]
    # The share sizes pytest-xdist's worksteal scheduler deals out first.
    sizes, left = [], len(items)
    for index in range(workers):
        sizes.append(left // (workers - index))
        left -= sizes[-1]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for item in long:
        fits = [index for index in range(workers) if len(shares[index]) < sizes[index]]
        chosen = min(fits, key=lambda index: loads[index])
        shares[chosen].append(item)
        loads[chosen] += costs[item.nodeid]
    # Within a share, a module's long tests run together and in their collected order (which
    # groups a module fixture's parameters), so its module fixtures are made as few times as can be.
    first: dict[str, int] = {}
    for order, item in enumerate(long):
        first.setdefault(item.nodeid.split("::")[0], order)
    collected = {id(item): index for index, item in enumerate(items)}
    rest = iter(short)
    arranged: list[pytest.Item] = []
    for share, size in zip(shares, sizes, strict=True):
        arranged += sorted(
            share, key=lambda item: (first[item.nodeid.split("::")[0]], collected[id(item)])
        )
        arranged += itertools.islice(rest, size - len(share))
    return arranged


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """With ``$PWF_TEST_CPU`` set, write each test's CPU seconds there (``tests/_cputime.py``)."""
    directory = os.environ.get(VARIABLE)
    if not directory:
        return (yield)
    with measure(item, Path(directory)):
        return (yield)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``built(name, make)``: the file ``make(path)`` writes, made once per run and shared.

    Expensive inputs (a database a writer process filled) are made by the
    first test that asks, under a file lock, in the run's base temporary
    directory that every pytest-xdist worker shares; later tests, on any
    worker, get the same finished file.  Tests must copy it before they
    change anything (ADR 0049).
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    shared = root / "built"
    shared.mkdir(exist_ok=True)

    def get(name: str, make: Callable[[Path], object]) -> Path:
        target = shared / name
        with (shared / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                scratch = shared / f"{name}.partial"
                shutil.rmtree(scratch, ignore_errors=True)  # left by a make that failed
                scratch.mkdir()
                make(scratch / name)
                (scratch / name).rename(target)
        return target

    return get


@pytest.fixture(scope="session")
def actor() -> Actor:
    """The actor every test batch is appended by."""
    return ACTOR


@pytest.fixture(scope="session")
def command() -> MakeCommand:
    """Build the n-th realistic ``command.recorded`` event."""
    return make_command


@pytest.fixture(scope="session")
def cause() -> MakeCause:
    """Build the cause of a command event."""
    return make_cause


@pytest.fixture(scope="session")
def fill() -> AppendBatches:
    """Append batches of realistic command events of the given sizes."""
    return append_batches


@pytest.fixture(scope="session")
def forge() -> Reseal:
    """Re-seal an edited event document so its own contentHash matches again."""
    return reseal


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where the fresh test database lives (its directory does not exist yet)."""
    return tmp_path / "state" / "pwf.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    """A fresh, empty store, closed after the test."""
    with SqliteStore(db_path, create=True) as opened:
        yield opened


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """A throwaway PostgreSQL server for the whole run, started from the machine's packages.

    Skipped with the reason when PostgreSQL or psycopg is missing, except
    under CI (``CI=true``), where a missing server fails the run instead.
    """
    reason = None
    bin_dir = find_bin()
    if bin_dir is None:
        reason = MISSING
    else:
        try:
            import psycopg  # noqa: F401, PLC0415 - only probing for the optional extra
        except ImportError:
            reason = "psycopg is not installed (pip install -e '.[postgres]')"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs PostgreSQL: {reason}")
        pytest.skip(reason)
    assert bin_dir is not None
    server = Server(bin_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server: Server) -> str:
    """The URL of a fresh, empty PostgreSQL database on the throwaway server."""
    return postgres_server.create_database()


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Any]:
    """Import ``bench.NAME`` from the repository root, as the benchmarks run (never timed here)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    return lambda name: importlib.import_module(f"bench.{name}")
