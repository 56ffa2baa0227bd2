"""Every query of the command, view, status, explain, query, log and web paths has a bounded plan.

A seeded database is written by the demo's traffic with sessions (the
command path: starts, claims, interactions, submissions, coordinators,
deliveries, turns, restarts, cancels), then read by every per-request read
path: the ``view.*`` operations, ``host.status``, ``state.status``,
``channel.status`` and ``run.status`` through ``pwf request``, ``pwf query``,
``pwf log show|tail``, ``pwf explain``, ``pwf status``, ``pwf session view``
and the data of every web page.  Every statement SQLite ran on the file is
captured (a trace callback on each connection pwf opens) and asked for its
``EXPLAIN QUERY PLAN``.  The test fails on a full scan or an automatic index
of a table that grows with the log, and on a join driven from every row of
one kind or status (how ``_origin_turn`` walked every step message, ADR
0077), unless the statement is in :data:`BOUNDED_BY_DESIGN`, each with why.

Whole-log walkers (``verify``, ``rebuild``, ``replay``, ``digest``, ``diff``,
``log export``) read every row by design and are not driven here.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import TYPE_CHECKING, Any, Final

import pytest
from click.testing import CliRunner

from pwf.cli import cli

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.integration._harness import traffic_module
else:
    from _harness import traffic_module

BOUNDED_TABLES: Final = frozenset(
    {"sqlite_master", "_pwf_head", "_pwf_checkpoint", "_pwf_meta", "host_state"}
)
"""Tables of one row or one row per projection or schema object: they do not grow with the log."""

LOW_CARDINALITY: Final = frozenset(
    {"kind", "status", "state", "type", "paused", "outcome", "lineage_kind", "source_type"}
)
"""Columns with a handful of values: a join led by them alone walks a fixed share of a table."""
LIVE: Final = frozenset(
    {"pending", "queued", "parked", "starting", "running", "waiting", "started", "validating"}
)
"""Values of work in progress: the rows holding them leave it, so they do not pile up."""

BOUNDED_BY_DESIGN: Final[dict[str, str]] = {
    # HOST §2.8's list revision and total and HOST §3.1's lifecycle contradictions are
    # kept by the runs read model (runs_totals, ADR 0094): no allowance.
    # channel.status counts every run as its `runs` and `resources` (HOST §2).
    r"^SELECT count\(\*\) FROM runs$": "channel.status counts: a count over a covering index",
    # The web runs page shows "page N of M": the count of the runs its filters select.
    r"^SELECT count\(\*\) AS n FROM runs r": "web runs page total: a count of the filtered runs",
    # The web overview's totals count runs and requests; its events are its first and last
    # seq (ADR 0094), so a count of the events does not match.
    r"^SELECT count\(\*\) AS runs, \(SELECT count\(\*\) FROM interactive_requests\)"
    r" AS requests, \(SELECT coalesce\(max\(seq\)": "web overview totals: counts of runs, requests",
}
"""Statements whose scan is the answer asked for, each with where it comes from and why."""


class Captured:
    """The statements run on one database file, through any connection pwf opened to it."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.statements: list[str] = []

    def wrap(self, connect: Callable[..., sqlite3.Connection]) -> Callable[..., Any]:
        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            target = str(args[0] if args else kwargs.get("database", ""))
            if str(self.db) in target:
                connection.set_trace_callback(self.statements.append)
            return connection

        return traced


def _traffic(db: Path, runs: int) -> None:
    traffic = traffic_module().Traffic(str(db), 7, sessions=True)
    traffic.batch(range(1, runs + 1))
    traffic.store.close()


def _pwf(db: Path, *args: str, stdin: str | None = None) -> str:
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], input=stdin, catch_exceptions=False)
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


def _request(number: int, operation: str, payload: object, **more: object) -> str:
    return json.dumps(
        {
            "clientId": "plans",
            "idempotencyKey": f"plans-{number}",
            "operation": operation,
            "payload": payload,
            "requestId": f"plans-{number}",
            "schema": "pi-workflows.client.v1",
            "type": "request",
            **more,
        }
    )


RUN: Final = "run-7"
INTERACTION: Final = "interaction-run-7-attempt-7"
SESSION: Final = "session-3"


def _reads(db: Path) -> None:
    """Every per-request read path over the seeded database."""
    for listing in ("runs", "interactions", "messages", "turns"):
        _pwf(db, "query", listing, "--limit", "20")
        _pwf(db, "query", listing, "--run", RUN)
        _pwf(db, "query", listing, "--session", SESSION)
    _pwf(db, "query", "runs")
    _pwf(db, "log", "show", "--run", RUN)
    _pwf(db, "log", "show", "--session", SESSION)
    _pwf(db, "log", "show", "--request", "req-10")
    _pwf(db, "log", "show", "--type", "turn.started", "--limit", "5")
    _pwf(db, "log", "show", "--from", "100", "--to", "120")
    _pwf(db, "log", "tail", "-n", "20")
    _pwf(db, "explain", "run", RUN)
    _pwf(db, "explain", "interaction", INTERACTION)
    _pwf(db, "status")
    _pwf(db, "session", "view", SESSION)
    lines = [
        _request(1, "view.runs.page", {"cursor": 0, "revision": "?"}),
        _request(2, "view.run.get", {}, runId=RUN),
        _request(3, "view.page", {"kind": "steps", "cursor": 0}, runId=RUN),
        _request(10, "view.page", {"kind": "updates", "cursor": 0}, runId=RUN),
        _request(4, "state.status", {}),
        _request(5, "host.status", {}),
        _request(6, "channel.status", {}),
        _request(7, "run.status", None, runId=RUN),
        _request(8, "run.list", {}),
        _request(9, "view.session.watch", {"sessionId": SESSION, "subscriptionId": "s"}),
    ]
    answers = _pwf(db, "request", "--canonicalize", stdin="\n".join(lines) + "\n")
    outcomes = [json.loads(line)["outcome"] for line in answers.splitlines()]
    assert set(outcomes) <= {"accepted", "adopted", "conflict"}, answers[:2000]
    from pwf.web import _data  # noqa: PLC0415 - the web extra
    from pwf.web._source import Database  # noqa: PLC0415

    database = Database(db)
    try:
        with database.view(None) as view:
            _data.overview_page(view, None)
            _data.runs_page(view, None, None, 1)
            _data.runs_page(view, "completed", SESSION, 1)
            _data.run_page(view, RUN)
            _data.interaction_page(view, INTERACTION)
            empty = {"type": "", "run": "", "session": "", "request": ""}
            _data.log_page(view, empty, 1, None)
            _data.log_page(view, empty, None, None)
            _data.log_page(view, {**empty, "run": RUN}, 1, None)
            _data.log_page(view, {**empty, "session": SESSION}, None, 5)
    finally:
        database.close()
    from pwf.commands import Context  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415
    from pwf.views.status import contradictions, state_counts  # noqa: PLC0415

    with SqliteStore(db, read_only=True) as store:  # what a served host.status adds
        ctx = Context(store.reader(), lambda _events: None, 1)
        contradictions(ctx)
        state_counts(ctx)
    # Writes that read as they decide, after the reads: a session's end and expiry.
    _pwf(db, "session", "expire")
    _pwf(db, "session", "detach", SESSION)


_DETAIL: Final = re.compile(r"^(SCAN|SEARCH) (\S+)(?: AS \S+)?(?: USING (.*))?$")


def _partial(connection: sqlite3.Connection, index: str) -> bool:
    row = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (index,)
    ).fetchone()
    return row is not None and row[0] is not None and " WHERE " in row[0]


def _is_table(connection: sqlite3.Connection, name: str) -> bool:
    row = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def _table_of(connection: sqlite3.Connection, name: str, aliases: dict[str, str]) -> str:
    return aliases.get(name, name)


def _aliases(sql: str) -> dict[str, str]:
    found = re.findall(r"\b(?:FROM|JOIN)\s+(\w+)\s+(?:AS\s+)?(\w+)", sql, re.IGNORECASE)
    keywords = {"where", "join", "on", "order", "group", "left", "using", "limit", "inner"}
    return {alias: table for table, alias in found if alias.lower() not in keywords}


def faults(connection: sqlite3.Connection, sql: str) -> list[str]:
    """What is unbounded in the plan of ``sql``: scans, automatic indexes, low-cardinality leads."""
    plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]
    aliases = _aliases(sql)
    paged = re.search(r"\bLIMIT\b", sql, re.IGNORECASE) is not None
    sorted_apart = any("TEMP B-TREE FOR ORDER BY" in detail for detail in plan)
    tables = [detail for detail in plan if _DETAIL.match(detail)]
    found: list[str] = []
    for position, detail in enumerate(tables):
        if "AUTOMATIC" in detail:
            found.append(detail)
            continue
        match = _DETAIL.match(detail)
        assert match is not None
        verb, name, using = match.group(1), match.group(2), match.group(3) or ""
        table = _table_of(connection, name.removeprefix("main."), aliases)
        if table in BOUNDED_TABLES or "VIRTUAL TABLE" in using or name == "CONSTANT":
            continue
        if _subquery(connection, name, table, sql):
            continue  # a subquery's rows, whose own tables have plan lines of their own
        index = re.search(r"INDEX (\w+)", using)
        if index is not None and _partial(connection, index.group(1)):
            continue  # a scan of, or a search among, the rows of a partial index: the live ones
        if verb == "SCAN":
            if index is not None and paged and not sorted_apart:
                continue  # a page read in index order: bounded by offset and limit
            found.append(detail)
            continue
        constrained = re.search(r"\((.*)\)", using)
        columns = set(re.findall(r"(\w+)[=<>]", constrained.group(1))) if constrained else set()
        if position > 0 or not columns <= LOW_CARDINALITY or _live(sql, columns):
            continue
        if paged and not sorted_apart:
            continue  # a page of one kind or status, read in index order
        found.append(f"{detail} (led by a column of few values)")
    return found


def _subquery(connection: sqlite3.Connection, name: str, table: str, sql: str) -> bool:
    """Whether a plan line's rows are a subquery's: named in ``sql``, or a UNION ALL's branch."""
    if name.startswith("(subquery-"):
        return True
    return not _is_table(connection, table) and bool(re.search(rf"\)\s*(?:AS\s+)?{table}\b", sql))


def _live(sql: str, columns: set[str]) -> bool:
    """Whether ``sql`` asks each of ``columns`` only for values of work in progress."""
    for column in columns:
        asked = re.findall(rf"\b{column}\s*(?:=\s*'(\w+)'|IN\s*\(([^)]*)\))", sql, re.IGNORECASE)
        values = {one or value.strip(" '") for one, many in asked for value in [*many.split(",")]}
        if not asked or not values <= LIVE:
            return False
    return True


def _normal(sql: str) -> str:
    return " ".join(sql.split())


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The seeded database and every statement its writers and readers ran on it."""
    db = tmp_path_factory.mktemp("plans") / "state.db"
    _pwf(db, "init")
    capture = Captured(db)
    connect = sqlite3.connect
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", capture.wrap(connect))
        _traffic(db, 40)
        _reads(db)
    return db, capture.statements


def test_every_query_of_the_read_and_command_paths_is_bounded(
    captured: tuple[Path, list[str]],
) -> None:
    db, statements = captured
    connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    unbounded: dict[str, list[str]] = {}
    allowed: set[str] = set()
    seen: set[str] = set()
    try:
        for raw in statements:
            sql = _normal(raw)
            verb = sql.split(" ", 1)[0].upper()
            shape = re.sub(r"'[^']*'|\b\d+\b", "?", sql)
            if verb not in {"SELECT", "WITH", "UPDATE", "DELETE", "INSERT"} or shape in seen:
                continue
            if verb == "INSERT" and " SELECT " not in sql.upper():
                continue
            seen.add(shape)
            found = faults(connection, sql)
            if not found:
                continue
            reason = next((p for p in BOUNDED_BY_DESIGN if re.search(p, sql)), None)
            if reason is not None:
                allowed.add(reason)
                continue
            unbounded[sql[:400]] = found
    finally:
        connection.close()
    assert len(seen) > 100, "the paths ran fewer statements than they should"
    assert not unbounded, "\n".join(f"{plan}\n  {sql}" for sql, plan in unbounded.items())
    # Each allowance is still needed: one no query needs any more is taken out.
    assert set(BOUNDED_BY_DESIGN) == allowed, set(BOUNDED_BY_DESIGN) - allowed


UNREACHED: Final[dict[str, str]] = {
    # A follow-up's delivery (commands/sessionview.py): whether its session still has a run
    # going.  The seeded traffic queues no follow-up, so its statements are planned here.
    "SELECT 1 FROM run_bindings b JOIN runs r ON r.run_id = b.run_id"
    " WHERE b.origin_session_id = 'session-1' AND r.status IN ('queued', 'running', 'waiting')": (
        "followUp delivery: is the session busy"
    ),
    "SELECT * FROM workflow_follow_ups WHERE run_id = 'run-1' AND request_id = 'r-1'": (
        "followUp.queue: the request already queued (commands/followups.py)"
    ),
    "SELECT * FROM workflow_follow_ups WHERE follow_up_id = 'f-1'": (
        "followUp.remove: the follow-up by its id (commands/rows.py)"
    ),
    # `pwf log receipt REQUEST` (cli/audit.py): the recorded request's batch, then its events.
    "SELECT batch FROM events WHERE request_id = 'req-10' AND +type = 'command.recorded'": (
        "pwf log receipt: the request's batch"
    ),
    "SELECT seq, body FROM events WHERE batch = 12 ORDER BY seq": "pwf log receipt: its events",
    # `pwf replay --until SEQ` (fold/replay.py) rounds a seq down to a whole batch.
    "SELECT min(seq) FROM events WHERE batch = (SELECT batch FROM events WHERE seq = 30)": (
        "pwf replay --until: the first seq of the batch"
    ),
}
"""Statements of request and operator paths the seeded traffic does not reach, with their path."""

UNUSED_BY_DESIGN: Final[dict[str, str]] = {
    # UNIQUE constraints and PRIMARY KEYs (SQLite keeps each as an index) that no plan of the
    # collected statements searches: each is kept for the rule it enforces on every write.
    "sqlite_autoindex_run_bindings_1": "run_bindings PRIMARY KEY: one binding per run",
    "sqlite_autoindex_run_view_content_1": (
        "run_view_content PRIMARY KEY: one row per run, content hash and media type"
    ),
    "workflow_messages_pending_step_source_idx": (
        "UNIQUE: one pending step message per source (DOMAIN's rule), checked on each write"
    ),
}
"""Indexes no collected plan uses, each kept for a constraint and named with it."""


def _used(connection: sqlite3.Connection, statements: Iterator[str]) -> dict[str, list[str]]:
    """For each index, the statements whose ``EXPLAIN QUERY PLAN`` reads it."""
    users: dict[str, list[str]] = {}
    for sql in statements:
        for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}"):
            for index in re.findall(r"\bINDEX (\w+)", row[3]):
                users.setdefault(index, []).append(sql)
    return users


def _collected(statements: list[str]) -> Iterator[str]:
    """The distinct reads and writes among ``statements``, then :data:`UNREACHED`."""
    seen: set[str] = set()
    for raw in statements:
        sql = _normal(raw)
        shape = re.sub(r"'[^']*'|\b\d+\b", "?", sql)
        verb = sql.split(" ", 1)[0].upper()
        if verb in {"SELECT", "WITH", "UPDATE", "DELETE", "INSERT"} and shape not in seen:
            seen.add(shape)
            yield sql
    yield from UNREACHED


def test_every_index_has_a_query_that_needs_it_or_a_constraint(
    captured: tuple[Path, list[str]],
) -> None:
    """Each index costs bytes on every write: one no plan reads names its rule (ADR 0099)."""
    db, statements = captured
    connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        indexes = {
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
        users = _used(connection, _collected(statements))
        bounded = {sql: faults(connection, sql) for sql in UNREACHED}
    finally:
        connection.close()
    assert not {sql: found for sql, found in bounded.items() if found}
    unused = indexes - set(users)
    assert unused == set(UNUSED_BY_DESIGN), (
        f"no query reads {sorted(unused - set(UNUSED_BY_DESIGN))}: drop it, or name its rule;"
        f" named but read or gone: {sorted(set(UNUSED_BY_DESIGN) - unused)}"
    )
    # Each statement planned outside the traffic reads an index: the list names index users.
    assert set(UNREACHED) <= {sql for found in users.values() for sql in found}


def test_no_index_is_a_prefix_of_another_on_its_table(captured: tuple[Path, list[str]]) -> None:
    """A plain index whose columns lead a wider one on its table is served by the wider one."""
    db, _ = captured
    connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        shapes: dict[str, list[tuple[str, tuple[str, ...], bool]]] = {}
        for name, table, sql in connection.execute(
            "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'"
        ):
            columns = tuple(
                str(row[2]) if row[1] >= 0 else f"<expression {row[1]}>"
                for row in connection.execute(f"PRAGMA index_info({name!r})")
            )
            plain = sql is not None and " UNIQUE " not in sql and " WHERE " not in sql
            shapes.setdefault(table, []).append((name, columns, plain))
    finally:
        connection.close()
    served = [
        (name, wider)
        for table in shapes.values()
        for name, columns, plain in table
        for wider, more, _ in table
        if plain and wider != name and len(more) > len(columns) and more[: len(columns)] == columns
    ]
    assert not served, served


def test_the_check_sees_a_scan_and_a_join_led_by_kind(tmp_path: Path) -> None:
    db = tmp_path / "shape.db"
    connection = sqlite3.connect(db)
    try:
        connection.executescript(
            "CREATE TABLE workflow_messages (workflow_message_id TEXT PRIMARY KEY,"
            " run_id TEXT, kind TEXT);"
            "CREATE INDEX workflow_messages_kind ON workflow_messages(kind);"
            "CREATE TABLE workflow_turns (workflow_turn_id TEXT PRIMARY KEY,"
            " workflow_message_id TEXT, run_id TEXT, state TEXT);"
            "CREATE INDEX workflow_turns_message ON workflow_turns(workflow_message_id);"
        )
        led_by_kind = (
            "SELECT 1 FROM workflow_turns t JOIN workflow_messages m"
            " ON m.workflow_message_id = t.workflow_message_id"
            " WHERE t.run_id = 'r' AND t.state = 'started' AND m.kind IN ('step', 'terminal')"
        )
        assert any("few values" in fault for fault in faults(connection, led_by_kind))
        assert faults(connection, "SELECT * FROM workflow_turns WHERE run_id = 'r'")
        connection.execute("CREATE INDEX workflow_turns_run ON workflow_turns(run_id, state)")
        assert not faults(connection, "SELECT * FROM workflow_turns WHERE run_id = 'r'")
        assert not faults(connection, led_by_kind.replace("m.kind", "+m.kind"))
        paged = "SELECT * FROM workflow_messages ORDER BY workflow_message_id LIMIT 5"
        assert not faults(connection, paged)
    finally:
        connection.close()


ADDED: Final = (
    "workflow_turns_run_idx",
    "workflow_follow_ups_status_idx",
    "runs_created_idx",
    "run_queue_created_idx",
    "run_queue_lease_idx",
    "interactive_requests_created_idx",
    "workflow_messages_source_id_idx",
)
"""The indexes ADR 0077 added to the projections' DDL that ADR 0099 kept."""


def _indexes(db: Path) -> set[str]:
    connection = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        return {row[0] for row in rows}
    finally:
        connection.close()


def test_a_database_made_before_the_indexes_gets_them_on_its_first_write(
    captured: tuple[Path, list[str]], tmp_path: Path
) -> None:
    from pwf.diff import digest_database  # noqa: PLC0415

    seeded, _ = captured
    db = tmp_path / "old.db"
    source = sqlite3.connect(f"{seeded.as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    source.close()
    for name in ADDED:
        target.execute(f"DROP INDEX {name}")
    target.commit()
    target.close()
    before = digest_database(db)
    assert not _indexes(db) & set(ADDED)

    _pwf(db, "query", "runs", "--run", RUN)  # a reading command writes nothing
    assert not _indexes(db) & set(ADDED)
    host_status = _request(1, "view.run.get", {}, runId=RUN)  # recorded nowhere
    _pwf(db, "request", "--canonicalize", stdin=host_status + "\n")  # the first write makes them
    assert _indexes(db) >= set(ADDED)
    assert digest_database(db) == before  # indexes hold no rows of their own

    for name in ADDED:  # a rebuild makes them as well
        connection = sqlite3.connect(db)
        connection.execute(f"DROP INDEX {name}")
        connection.commit()
        connection.close()
    _pwf(db, "rebuild")
    assert _indexes(db) >= set(ADDED)
    assert digest_database(db) == before


def test_explain_reads_no_session_history_from_before_the_attempt(
    captured: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pwf.explain import explain_interaction, explain_run  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    db, _ = captured
    late = "run-38"  # session-3's sixth run: five runs of history before it
    read: list[tuple[dict[str, object], int]] = []
    find = SqliteStore.find

    def counted(self: SqliteStore, **wanted: Any) -> Iterator[Any]:
        for stored in find(self, **wanted):
            read.append((wanted, stored.seq))
            yield stored

    monkeypatch.setattr(SqliteStore, "find", counted)
    with SqliteStore(db, read_only=True) as store:
        first = min(stored.seq for stored in find(store, run_id=late))
        explain_interaction(store, f"interaction-{late}-attempt-38")
        explain_run(store, late)
    session_reads = [seq for wanted, seq in read if wanted.get("session_id") is not None]
    assert session_reads, "the timelines read the session's events"
    assert min(session_reads) >= first, "a session event from before the run was read"


def test_explain_reads_no_session_history_from_after_a_finished_run(
    captured: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished run's session events stop at its own last event (ADR 0085)."""
    from pwf.explain import explain_interaction, explain_run  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    db, _ = captured
    early = "run-3"  # session-3's first run: five runs of history after it
    read: list[tuple[dict[str, object], int]] = []
    find = SqliteStore.find

    def counted(self: SqliteStore, **wanted: Any) -> Iterator[Any]:
        for stored in find(self, **wanted):
            read.append((wanted, stored.seq))
            yield stored

    monkeypatch.setattr(SqliteStore, "find", counted)
    with SqliteStore(db, read_only=True) as store:
        own = max(stored.seq for stored in find(store, run_id=early))
        later = sum(1 for stored in find(store, session_id="session-3") if stored.seq > own)
        explained = explain_run(store, early)
        explain_interaction(store, f"interaction-{early}-attempt-3")
    assert later > 20, "the session has no history after the run: the test proves nothing"
    assert explained.state["run"]["status"] in {"completed", "failed"}  # type: ignore[index]
    past = [seq for wanted, seq in read if wanted.get("session_id") is not None and seq > own]
    assert past == [], past  # nor read by the store: ``find`` stops at the run's last event


def test_a_bounded_find_stops_at_its_last_seq_when_nothing_more_matches(
    captured: tuple[Path, list[str]],
) -> None:
    """``find(until=)`` does not walk the rest of the log for a type that never comes (ADR 0085)."""
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    db, _ = captured
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    with SqliteStore(db, read_only=True) as store:
        own = max(stored.seq for stored in store.find(run_id="run-3"))
        steps = []
        for until in (own, None):
            counted[0] = 0
            store.connection.set_progress_handler(tick, 1)
            found = list(
                store.find(
                    after=own - 50, until=until, session_id="session-3", type="coordinator.attached"
                )
            )
            store.connection.set_progress_handler(None, 0)
            steps.append(counted[0])
            assert found == []
    assert steps[1] > 3 * steps[0], steps


def test_lifecycle_contradictions_are_counted_by_sqlite_as_the_table_defines_them(
    captured: tuple[Path, list[str]], tmp_path: Path
) -> None:
    from pwf.commands import Context  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415
    from pwf.views.status import ALLOWED_LIFECYCLE, contradictions  # noqa: PLC0415

    seeded, _ = captured
    db = tmp_path / "pairs.db"
    source = sqlite3.connect(f"{seeded.as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    source.close()
    target.execute(  # three finished runs whose queue entries say parked
        "UPDATE run_queue SET status = 'parked' WHERE run_id IN"
        " (SELECT run_id FROM runs WHERE status = 'completed' LIMIT 3)"
    )
    target.commit()
    target.close()
    with SqliteStore(db, read_only=True) as store:
        ctx = Context(store.reader(), lambda _events: None, 0)
        pairs = ctx.all(
            "SELECT r.status AS run, q.status AS queue FROM runs r"
            " JOIN run_queue q ON q.run_id = r.run_id"
        )
        wanted = sum(1 for p in pairs if p["queue"] not in ALLOWED_LIFECYCLE.get(p["run"], ()))
        assert wanted == 3
        assert contradictions(ctx) == wanted


def _retained_by_rule(ctx: Any, session_id: str) -> Any:
    """§5.9's rule, one message at a time, as pwf asked it before ADR 0077."""
    from pwf.commands.runs import TERMINAL  # noqa: PLC0415
    from pwf.commands.sessionview import RETAIN_MS  # noqa: PLC0415
    from pwf.commands.turns import latest_turn  # noqa: PLC0415

    cleared = ctx.one(
        "SELECT * FROM session_terminal_views WHERE target_session_id = ?", session_id
    )
    for message in ctx.all(
        "SELECT m.*, r.status AS run_status FROM workflow_messages m"
        " JOIN runs r ON r.run_id = m.run_id WHERE m.target_session_id = ?"
        " AND m.kind = 'terminal' ORDER BY m.order_number DESC",
        session_id,
    ):
        if message["run_status"] not in TERMINAL:
            continue
        if (
            cleared is not None
            and cleared["cleared_run_id"] == message["run_id"]
            and cleared["cleared_at"] >= message["created_at"]
        ):
            continue
        if message["status"] == "pending":
            return message
        if message["status"] == "cancelled":
            continue
        turn = latest_turn(ctx, message["workflow_message_id"])
        if turn is None or turn.ended_at is None or turn.ended_at + RETAIN_MS > ctx.now:
            return message
    return None


def test_the_retained_terminal_in_one_statement_is_the_rule_s_answer(
    captured: tuple[Path, list[str]],
) -> None:
    from pwf.commands import Context  # noqa: PLC0415
    from pwf.commands.rows import MessageRow, fields  # noqa: PLC0415
    from pwf.commands.sessionview import RETAIN_MS, retained_terminal  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    db, _ = captured
    with SqliteStore(db, read_only=True) as store:
        reader = store.reader()
        probe = Context(reader, lambda _events: None, 0)
        sessions = [
            r["s"]
            for r in probe.all("SELECT DISTINCT target_session_id AS s FROM workflow_messages")
        ]
        ends = [
            r["e"]
            for r in probe.all(
                "SELECT ended_at AS e FROM workflow_turns WHERE ended_at IS NOT NULL"
            )
        ]
        nows = [0, 10**13, *(end + RETAIN_MS + shift for end in ends for shift in (-1, 0, 1))]
        found = 0
        for now in nows:
            ctx = Context(reader, lambda _events: None, now)
            for session in sessions:
                wanted, got = _retained_by_rule(ctx, session), retained_terminal(ctx, session)
                assert (
                    None if wanted is None else [wanted[name] for name in fields(MessageRow)]
                ) == (None if got is None else list(got)), (now, session)
                found += wanted is not None
        assert found, "no terminal was ever retained: the comparison proved nothing"


_LATEST_TURN: Final = (
    "SELECT workflow_turn_id, state, started_at, ended_at FROM workflow_turns t"
    " WHERE t.workflow_message_id = workflow_messages.workflow_message_id"
    " ORDER BY t.started_at DESC, t.workflow_turn_id DESC LIMIT 1"
)
_REDERIVE: Final = (
    "UPDATE workflow_messages SET (latest_turn_id, latest_turn_state,"  # noqa: S608 - constant
    f" latest_turn_started_at, latest_turn_ended_at) = ({_LATEST_TURN})"
)
"""Each message's latest turn as ``workflow_turns`` says it, after a step edits the turns."""


def test_each_message_keeps_its_latest_turn_as_the_turns_say(
    captured: tuple[Path, list[str]],
) -> None:
    seeded, _ = captured
    connection = sqlite3.connect(f"{seeded.as_uri()}?mode=ro", uri=True)
    try:
        kept = connection.execute(
            "SELECT workflow_message_id, latest_turn_id, latest_turn_state,"
            " latest_turn_started_at, latest_turn_ended_at FROM workflow_messages"
            " ORDER BY workflow_message_id"
        ).fetchall()
        derived = connection.execute(
            "SELECT m.workflow_message_id, t.workflow_turn_id, t.state, t.started_at,"
            " t.ended_at FROM workflow_messages m LEFT JOIN (SELECT *, row_number() OVER"
            " (PARTITION BY workflow_message_id ORDER BY started_at DESC,"
            " workflow_turn_id DESC) AS n FROM workflow_turns) t"
            " ON t.workflow_message_id = m.workflow_message_id AND t.n = 1"
            " ORDER BY m.workflow_message_id"
        ).fetchall()
    finally:
        connection.close()
    assert kept == derived
    assert sum(1 for row in kept if row[2] == "ended") > 10, "too few turns to prove anything"


def _open_by_rule(ctx: Any, session_id: str) -> Any:
    """§5.6's rule, one message at a time, as pwf asked it before ADR 0077."""
    from pwf.commands.turns import latest_turn  # noqa: PLC0415

    rows = ctx.all(
        "SELECT m.*, r.status AS request_status, runs.paused AS run_paused"
        " FROM workflow_messages m JOIN runs ON runs.run_id = m.run_id"
        " LEFT JOIN interactive_requests r ON r.request_id = m.source_id"
        " WHERE m.target_session_id = ? AND m.status = 'sent'"
        " AND m.kind IN ('step', 'terminal', 'followUp') ORDER BY m.order_number DESC",
        session_id,
    )
    for row in rows:
        if row["kind"] == "step":
            if row["request_status"] == "pending" and not row["run_paused"]:
                return row
            continue
        latest = latest_turn(ctx, row["workflow_message_id"])
        if latest is None or latest.state == "started":
            return row
    return None


def test_the_open_message_in_one_statement_is_the_rule_s_answer(
    captured: tuple[Path, list[str]], tmp_path: Path
) -> None:
    from pwf.commands import Context  # noqa: PLC0415
    from pwf.commands.rows import MessageRow, fields  # noqa: PLC0415
    from pwf.commands.turns import open_message  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    seeded, _ = captured
    db = tmp_path / "open.db"
    source = sqlite3.connect(f"{seeded.as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    source.close()
    target.execute("PRAGMA ignore_check_constraints = ON")
    found: set[str] = set()
    steps = [  # each step makes other answers right: a turn reopened, a request pending, a pause
        "UPDATE workflow_turns SET state = 'started', ended_at = NULL WHERE rowid % 9 = 0",
        "UPDATE interactive_requests SET status = 'pending' WHERE rowid % 7 = 0",
        "UPDATE runs SET paused = 1 WHERE rowid % 5 = 0",
        "DELETE FROM workflow_turns WHERE rowid % 4 = 0",
    ]
    for step in [None, *steps]:
        if step is not None:
            target.execute(step)
            target.execute(_REDERIVE)
            target.commit()
        with SqliteStore(db, read_only=True) as store:
            ctx = Context(store.reader(), lambda _events: None, 0)
            for (session,) in ctx.reader.connection.execute(  # type: ignore[attr-defined]
                "SELECT DISTINCT target_session_id FROM workflow_messages"
            ):
                wanted, got = _open_by_rule(ctx, session), open_message(ctx, session)
                assert (
                    None if wanted is None else [wanted[name] for name in fields(MessageRow)]
                ) == (None if got is None else list(got)), (step, session)
                if wanted is not None:
                    found.add(wanted["kind"])
    target.close()
    assert found >= {"step", "terminal"}, found


def _read_history(db: Path, session: str, count: int) -> None:
    """Give ``session`` ``count`` newer terminal messages, each sent and read by an ended turn."""
    connection = sqlite3.connect(db)
    try:
        run_id, top, at = connection.execute(
            "SELECT run_id, max(order_number), max(created_at) FROM workflow_messages"
            " WHERE target_session_id = ? AND kind = 'terminal'",
            (session,),
        ).fetchone()
        for n in range(1, count + 1):
            message, turn = f"read-{n}", f"read-turn-{n}"
            connection.execute(
                "INSERT INTO workflow_messages (workflow_message_id, run_id, target_session_id,"
                " kind, source_id, content_hash, order_number, status, pi_session_entry_id,"
                " created_at, updated_at, latest_turn_id, latest_turn_state,"
                " latest_turn_started_at, latest_turn_ended_at)"
                " VALUES (?, ?, ?, 'terminal', ?, x'00', ?, 'sent', ?, ?, ?, ?, 'ended', ?, ?)",
                (message, run_id, session, message, top + n, f"e-{n}", at, at, turn, at, at),
            )
            connection.execute(
                "INSERT INTO workflow_turns (workflow_turn_id, workflow_message_id, run_id,"
                " target_session_id, state, stop_reason, started_at, ended_at)"
                " VALUES (?, ?, ?, ?, 'ended', 'completed', ?, ?)",
                (turn, message, run_id, session, at, at),
            )
        connection.commit()
    finally:
        connection.close()


def _steps(db: Path, session: str, now: int) -> tuple[int, int]:
    """SQLite's virtual-machine steps (in thousands) for the open message and retained terminal."""
    from pwf.commands import Context  # noqa: PLC0415
    from pwf.commands.sessionview import retained_terminal  # noqa: PLC0415
    from pwf.commands.turns import open_message  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    found = []
    with SqliteStore(db, read_only=True) as store:
        ctx = Context(store.reader(), lambda _events: None, now)
        connection = ctx.reader.connection  # type: ignore[attr-defined]
        for ask in (open_message, retained_terminal):
            counted[0] = 0
            connection.set_progress_handler(tick, 1000)
            ask(ctx, session)
            connection.set_progress_handler(None, 0)
            found.append(counted[0])
    return found[0], found[1]


def test_the_open_message_and_retained_terminal_do_not_walk_what_was_read(
    captured: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Read messages piling up in a session cost the two lookups nothing (ADR 0085)."""
    seeded, _ = captured
    db = tmp_path / "history.db"
    source = sqlite3.connect(f"{seeded.as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    source.close()
    target.close()
    session, now = "session-1", 10**13
    small = _steps(db, session, now)
    _read_history(db, session, 20_000)
    large = _steps(db, session, now)
    # Walking 20 000 read messages takes hundreds of thousands of steps; a search, a handful.
    assert large[0] <= small[0] + 2, (small, large)
    assert large[1] <= small[1] + 2, (small, large)


def test_the_live_queue_statuses_are_all_but_the_finished_ones() -> None:
    """The reservation names the live statuses: exactly the queue's others (ADR 0085)."""
    from pwf.commands.runs import LIVE_QUEUE  # noqa: PLC0415
    from pwf.projections.runs import DDL  # noqa: PLC0415

    table = next(d for d in DDL if "CREATE TABLE IF NOT EXISTS run_queue" in d)
    domain = set(re.findall(r"'(\w+)'", table.split("CHECK (status IN (")[1].split(")")[0]))
    assert domain - {"done", "failed", "cancelled"} == set(LIVE_QUEUE)


def _finished_runs(db: Path, session: str, count: int) -> None:
    """Give ``session`` ``count`` more finished runs (copies of one of its runs, queue done)."""
    connection = sqlite3.connect(db)
    try:
        (run_id,) = connection.execute(
            "SELECT run_id FROM runs WHERE origin_session_id = ? LIMIT 1", (session,)
        ).fetchone()
        for table in ("runs", "run_queue"):
            connection.execute(f"CREATE TEMP TABLE copy AS SELECT * FROM {table} WHERE 0")  # noqa: S608
            for n in range(count):
                connection.execute(
                    f"INSERT INTO copy SELECT * FROM {table} WHERE run_id = ?",  # noqa: S608
                    (run_id,),
                )
                connection.execute(
                    "UPDATE copy SET run_id = ? WHERE run_id = ?", (f"pile-{n}", run_id)
                )
            if table == "run_queue":
                connection.execute("UPDATE copy SET status = 'done'")
            connection.execute(f"INSERT INTO {table} SELECT * FROM copy")  # noqa: S608
            connection.execute("DROP TABLE copy")
        connection.commit()
    finally:
        connection.close()


def _reservation_steps(db: Path, session: str) -> tuple[int, Any]:
    from pwf.commands import Context  # noqa: PLC0415
    from pwf.commands.rows import RunRow, fields  # noqa: PLC0415
    from pwf.commands.sessionview import reservation  # noqa: PLC0415
    from pwf.store.sqlite import SqliteStore  # noqa: PLC0415

    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    with SqliteStore(db, read_only=True) as store:
        ctx = Context(store.reader(), lambda _events: None, 0)
        connection = ctx.reader.connection  # type: ignore[attr-defined]
        connection.set_progress_handler(tick, 1000)
        found = reservation(ctx, session)
        connection.set_progress_handler(None, 0)
        wanted = ctx.one(  # the rule as pwf asked it before ADR 0085
            "SELECT r.* FROM runs r JOIN run_queue q ON q.run_id = r.run_id"
            " WHERE r.origin_session_id = ? AND q.status NOT IN ('done', 'failed', 'cancelled')"
            " ORDER BY r.created_at DESC, r.run_id DESC LIMIT 1",
            session,
        )
        assert (None if wanted is None else [wanted[name] for name in fields(RunRow)]) == (
            None if found is None else list(found)
        )
    return counted[0], found


def test_a_session_s_reservation_does_not_walk_its_finished_runs(
    captured: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Finished runs piling up in a session cost its reservation nothing (ADR 0085)."""
    seeded, _ = captured
    db = tmp_path / "runs.db"
    source = sqlite3.connect(f"{seeded.as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    source.close()
    target.execute(  # a live run in each session, so the answer is a run, not None
        "UPDATE run_queue SET status = 'parked' WHERE run_id IN (SELECT max(run_id)"
        " FROM runs GROUP BY origin_session_id)"
    )
    target.commit()
    target.close()
    session = "session-1"
    small, found = _reservation_steps(db, session)
    assert found is not None
    _finished_runs(db, session, 20_000)
    large, _ = _reservation_steps(db, session)
    assert large <= small + 2, (small, large)
