"""Bad input through ``pwf request`` and ``pwf worker``: an answer or one error line, never more.

Hypothesis sends arbitrary bytes and mutated valid messages through the
click commands in process (fast), then smaller batches through the real
subprocess CLI; the hostile corpus of ``_corpus.py`` goes through both.  A
line gets one canonical response line, or one ``line N: why`` with exit 2
and a log whose length and head did not move.  Whatever was accepted, the
log still verifies and its projections equal a rebuild.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwf import canonical
from pwf.cli import cli
from pwf.cli._options import open_store
from pwf.host import Host
from pwf.protocol.client import parse_request

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from tests.reliability._corpus import CORPUS, SURROGATE_IDS, Hostile, Message, surrogate_id
    from tests.reliability._reliability import (
        AT,
        START,
        assert_sound,
        init,
        log_state,
        pwf,
        request_line,
        spawn_writer,
        stop,
    )
    from tests.reliability.conftest import Figures
else:
    from _corpus import CORPUS, SURROGATE_IDS, Hostile, Message, surrogate_id
    from _reliability import (
        AT,
        START,
        assert_sound,
        init,
        log_state,
        pwf,
        request_line,
        spawn_writer,
        stop,
    )

pytestmark = pytest.mark.slow

PART: Final = "test_fuzz"
Protocol = Literal["client", "worker"]
COMMAND: Final[dict[Protocol, str]] = {"client": "request", "worker": "worker"}
RESPONSE: Final[dict[Protocol, str]] = {
    "client": "pi-workflows.client.v1",
    "worker": "pi-workflows.worker-response.v1",
}
FUZZ: Final = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BATCHES: Final = settings(FUZZ, max_examples=6)
"""Subprocess batches: each example starts the real CLI once with several lines."""


class Live(NamedTuple):
    """The seeded database's facts the valid messages are built from."""

    run: str
    epoch: str
    generation: int


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Live]:
    """Runs in every state a writer leaves them, plus ``fz-run`` held by a live worker."""
    db = tmp_path_factory.mktemp("fuzz") / "template.db"
    init(db)
    writer = spawn_writer(
        db, "seed", steps=20, gate="0", clock=AT - 10**9, errors=db.with_name("w.err")
    )
    try:
        writer.communicate(timeout=300)
    finally:
        stop(writer)
    assert 0 == writer.returncode, db.with_name("w.err").read_text()
    with open_store(str(db)) as store:
        host = Host(store, new_epoch=lambda: "fz-w-1")
        start = {**START, "originSessionId": "fz-s"}
        line = request_line("run.start", start, rid="fz-start", run_id="fz-run")
        assert "accepted" == host.request(parse_request(line), AT).outcome
        envelope = host.launch("fz-run", AT)
    return db, Live("fz-run", envelope.worker_epoch, envelope.generation)


@pytest.fixture
def seeded(tmp_path: Path, template: tuple[Path, Live]) -> tuple[Path, Live]:
    """A private copy of the seeded database (closed, so one file holds it all)."""
    db = tmp_path / "state.db"
    shutil.copyfile(template[0], db)
    return db, template[1]


def client_messages() -> list[Message]:
    """Valid requests of most operations, against seeded runs and sessions."""

    def request(operation: str, payload: object, run: str | None = None) -> Message:
        line = request_line(operation, payload, rid=f"fz-{operation}", run_id=run)
        parsed: Message = canonical.parse_line(line)  # type: ignore[assignment]
        return parsed

    submission = {
        "requestId": "i-1",
        "attempt": "a",
        "step": "ask",
        "submissionId": "s",
        "value": 1,
    }
    return [
        request("host.status", {}),
        request("run.list", {}),
        request("run.status", {}, "seed-run-1"),
        request("run.start", {**START, "originSessionId": "fz-s2"}, "fz-new"),
        request("run.pause", {}, "fz-run"),
        request("run.resume", {}, "seed-run-2"),
        request("run.cancel", {}, "seed-run-1"),
        request("interaction.submit", submission, "seed-run-1"),
        request("view.session.watch", {"sessionId": "seed-s-1", "subscriptionId": "v-1"}),
    ]


def worker_messages(live: Live) -> list[Message]:
    """Valid messages from the live worker of ``fz-run``."""
    base = {
        "schema": "pi-workflows.worker-message.v1",
        "launchSchema": "pi-workflows.worker-launch.v1",
        "messageId": "fz-m",
        "kind": "worker.progress",
        "runId": live.run,
        "generation": live.generation,
        "workerEpoch": live.epoch,
        "expectedRevision": 1,
    }
    operations: list[tuple[str, object]] = [
        ("worker.ready", {}),
        ("node.started", {"nodeId": "ask", "timeoutMs": 60_000}),
        ("interaction.request", {"contract": {"prompt": "hi"}}),
        ("store.readRun", {}),
        ("run.finished", {"status": "completed", "finalOutput": {}}),
    ]
    return [
        {**base, "operation": name, "payload": payload, "attemptId": "fz-a"}
        for name, payload in operations
    ]


def _outcome(line: bytes, db: Path, protocol: Protocol) -> tuple[int, bytes, str]:
    """Run one line through the click command in process; an exception escapes as a failure."""
    command = [COMMAND[protocol], "--db", str(db), "--at", str(AT)]
    result = CliRunner().invoke(cli, command, input=line + b"\n", catch_exceptions=False)
    return result.exit_code, result.stdout_bytes, result.stderr


def judge(line: bytes, db: Path, protocol: Protocol, figures: Figures) -> str:
    """Send one line and check the contract; returns ``refused``, ``answered`` or ``silent``."""
    before = log_state(db)
    code, out, err = _outcome(line, db, protocol)
    figures.add(PART, "inputs tried")
    assert "Traceback" not in err
    if err:
        assert (2, b"", 1) == (code, out, len(err.splitlines())), err
        assert err.startswith("line 1: "), err
        assert before == log_state(db), "a refused line moved the log"
        figures.add(PART, "refused")
        return "refused"
    assert 0 == code
    if not out:
        assert line == b"" or line.startswith(b"#"), line
        return "silent"
    [reply] = out.splitlines()
    answer: Any = canonical.parse_line(reply)
    assert RESPONSE[protocol] == answer["schema"]
    figures.add(PART, "answered")
    return "answered"


TEXT: Final = st.text(st.characters(exclude_categories=()), max_size=24)
"""Any code point, lone surrogates included: the original accepts them (ADR 0027)."""
JSON: Final = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, messages: list[Message]) -> bytes:
    """A valid message with members set, dropped or added, then (one in four) damaged byte-wise."""
    message = dict(draw(st.sampled_from(messages)))
    for _ in range(draw(st.integers(1, 3))):
        change = draw(st.sampled_from(["set", "drop", "add", "payload", "payload", "payload"]))
        if change == "set":
            message[draw(st.sampled_from(sorted(message)))] = draw(JSON)
        elif change == "drop" and message:
            message.pop(draw(st.sampled_from(sorted(message))))
        elif change == "add":
            message[draw(TEXT)] = draw(JSON)
        elif isinstance(message.get("payload"), dict):
            message["payload"] = {**message["payload"], draw(TEXT): draw(JSON)}
    line = canonical.encode(message)
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(line)))
        cut = draw(st.integers(0, 8))
        line = line[:at] + draw(st.binary(max_size=4)) + line[at + cut :]
    return line.replace(b"\n", b"")


def lines(messages: list[Message]) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes (one line's worth) or a mutated valid message."""
    raw = st.binary(max_size=300).map(lambda data: data.replace(b"\n", b""))
    return st.one_of(raw, mutated(messages), mutated(messages))


@pytest.mark.parametrize("protocol", ["client", "worker"])
def test_fuzzed_lines_in_process(
    seeded: tuple[Path, Live], figures: Figures, protocol: Protocol
) -> None:
    """Every fuzzed line gets an answer or one refusal; the log ends sound."""
    db, live = seeded
    messages = client_messages() if protocol == "client" else worker_messages(live)

    @FUZZ
    @given(line=lines(messages))
    def one(line: bytes) -> None:
        judge(line, db, protocol, figures)

    one()
    assert_sound(db)


def _check_batch(
    sent: list[bytes], protocol: Protocol, result: subprocess.CompletedProcess[bytes]
) -> tuple[int, int]:
    """Each counted line was answered or refused once, in order; returns (answered, refused)."""
    text = result.stderr.decode("utf-8", errors="replace")
    assert "Traceback" not in text
    refused = [int(line.split(":")[0].removeprefix("line ")) for line in text.splitlines()]
    assert refused == sorted(set(refused)), text
    assert set(refused) <= {number for number, line in enumerate(sent, 1) if line}, text
    counted = {number for number, line in enumerate(sent, 1) if line and line[:1] != b"#"}
    replies = [canonical.parse_line(line) for line in result.stdout.splitlines()]
    assert len(counted - set(refused)) == len(replies)
    assert all(RESPONSE[protocol] == reply["schema"] for reply in replies)  # type: ignore[index]
    assert (2 if refused else 0) == result.returncode
    return len(replies), len(refused)


def run_batch(db: Path, protocol: Protocol, sent: list[bytes], figures: Figures) -> None:
    """Send ``sent`` to the real ``pwf`` in one process and account for every line."""
    before = log_state(db)
    stdin = b"".join(line + b"\n" for line in sent)
    result = pwf(COMMAND[protocol], "--db", str(db), "--at", str(AT), stdin=stdin)
    answered, refused = _check_batch(sent, protocol, result)
    if not answered:
        assert before == log_state(db), "refused lines moved the log"
    figures.add(PART, "inputs through the subprocess CLI", len(sent))
    figures.add(PART, "inputs tried", len(sent))
    figures.add(PART, "answered", answered)
    figures.add(PART, "refused", refused)


@pytest.mark.parametrize("protocol", ["client", "worker"])
def test_fuzzed_batches_through_the_cli(
    seeded: tuple[Path, Live], figures: Figures, protocol: Protocol
) -> None:
    """Batches of fuzzed lines through the real command line; the log ends sound."""
    db, live = seeded
    messages = client_messages() if protocol == "client" else worker_messages(live)

    @BATCHES
    @given(sent=st.lists(lines(messages), min_size=1, max_size=8))
    def batch(sent: list[bytes]) -> None:
        run_batch(db, protocol, sent, figures)

    batch()
    assert_sound(db)


def _base(protocol: Protocol, live: Live) -> Message:
    return client_messages()[0] if protocol == "client" else worker_messages(live)[0]


@pytest.mark.parametrize("protocol", ["client", "worker"])
@pytest.mark.parametrize("hostile", CORPUS, ids=[hostile.name for hostile in CORPUS])
def test_hostile_line(
    seeded: tuple[Path, Live], figures: Figures, protocol: Protocol, hostile: Hostile
) -> None:
    """Each hostile line gets exactly the answer the corpus expects."""
    db, live = seeded
    expected = hostile.client if protocol == "client" else hostile.worker
    got = judge(hostile.build(_base(protocol, live)), db, protocol, figures)
    assert expected in (got, "either"), got
    assert_sound(db)


@pytest.mark.parametrize("protocol", ["client", "worker"])
def test_hostile_corpus_through_the_cli(
    seeded: tuple[Path, Live], figures: Figures, protocol: Protocol
) -> None:
    """The whole corpus in one real ``pwf`` process: every line accounted for."""
    db, live = seeded
    run_batch(db, protocol, [hostile.build(_base(protocol, live)) for hostile in CORPUS], figures)
    assert_sound(db)


@pytest.mark.parametrize(("protocol", "field"), SURROGATE_IDS)
def test_lone_surrogate_in_an_id(
    seeded: tuple[Path, Live], figures: Figures, protocol: Protocol, field: str
) -> None:
    """An id holding a lone surrogate is answered or refused like any other bad id."""
    db, live = seeded
    base = client_messages()[2] if protocol == "client" else worker_messages(live)[1]
    judge(surrogate_id(field)(base), db, protocol, figures)
    assert_sound(db)
