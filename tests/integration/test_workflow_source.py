"""``run.start`` ``workflowSource`` as an object (HOST.md §5, §7.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pwf.protocol.worker import encode_launch

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.integration._harness import START, Fixture
else:
    from _harness import START, Fixture

INVALID = "Stored workflow source identity is invalid"
BUILTIN = {"kind": "builtin", "id": "echo", "revision": "test"}
FILE = {"kind": "file", "path": "/p/flows/main.ts", "hash": "abc"}
SET = {
    "root": FILE,
    "mounted": [
        {"mountPath": ["review"], "workflowName": "review", "source": BUILTIN},
        {"mountPath": ["a", "b"], "workflowName": "nested", "source": FILE},
    ],
}


def _start(fx: Fixture, source: object, *, run_id: str = "run-1", key: str = "s-1", **more: Any):
    payload = {**START, "workflowSource": source, **more}
    return fx.request("run.start", payload, run_id=run_id, key=key)


def _sources(fx: Fixture, run_id: str = "run-1") -> list[tuple[str, str, str, str]]:
    _names, rows = fx.store.reader().table(
        "SELECT mount_path, source_type, source_ref, source_revision FROM run_sources"
        " WHERE run_id = ? ORDER BY mount_path",
        (run_id,),
    )
    return rows


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[Fixture]:
    fixture = Fixture(tmp_path / "s.db")
    yield fixture
    fixture.close()


class TestAccepted:
    def test_a_bare_identity_is_a_root_row(self, fx: Fixture) -> None:
        """A single identity is normalised to ``{root, mounted:[]}``: one row, mount path ''."""
        assert "accepted" == _start(fx, BUILTIN).outcome
        assert [("", "builtin", "echo", "test")] == _sources(fx)

    def test_a_source_set_is_one_row_per_mount(self, fx: Fixture) -> None:
        """Root ``''`` plus mounted paths joined with ``/``; ref and revision per kind."""
        assert "accepted" == _start(fx, SET).outcome
        assert [
            ("", "file", "/p/flows/main.ts", "abc"),
            ("a/b", "file", "/p/flows/main.ts", "abc"),
            ("review", "builtin", "echo", "test"),
        ] == _sources(fx)
        fx.assert_rebuild_equals_live()

    def test_the_launch_envelope_carries_the_object(self, fx: Fixture) -> None:
        """The envelope's ``workflowSource`` is ``{root, mounted}`` read back from the rows.

        Mounted entries come in mount-path order; the workflow name comes from the
        definition snapshot's ``composition.mounts``, else the joined path.
        """
        snapshot = {"composition": {"mounts": [{"mountPath": ["review"], "workflowName": "Rev"}]}}
        assert "accepted" == _start(fx, SET, definitionSnapshot=snapshot).outcome
        envelope = fx.launch(at=1000)
        assert {
            "root": FILE,
            "mounted": [
                {"mountPath": ["a", "b"], "workflowName": "a/b", "source": FILE},
                {"mountPath": ["review"], "workflowName": "Rev", "source": BUILTIN},
            ],
        } == envelope.workflow_source
        assert b'"workflowSource":{"mounted":[{"mountPath":["a","b"]' in encode_launch(envelope)


class TestRefused:
    @pytest.mark.parametrize(
        "source",
        [
            "builtin",
            "builtin:echo",
            None,
            5,
            [],
            {},
            {"kind": "builtin", "id": "echo"},
            {"kind": "builtin", "id": "echo", "revision": 1},
            {"kind": "file", "path": "/p", "revision": "x"},
            {"kind": "git", "id": "echo", "revision": "test"},
            {"kind": ["builtin"], "id": "echo", "revision": "test"},
            {"kind": {"builtin": 1}, "path": "/p", "hash": "h"},
            {"root": {"kind": ["file"], "path": "/p", "hash": "h"}, "mounted": []},
            {"root": BUILTIN},
            {"root": BUILTIN, "mounted": {}},
            {"root": "builtin", "mounted": []},
            {
                "root": BUILTIN,
                "mounted": [{"mountPath": "review", "workflowName": "r", "source": BUILTIN}],
            },
            {
                "root": BUILTIN,
                "mounted": [{"mountPath": [1], "workflowName": "r", "source": BUILTIN}],
            },
            {"root": BUILTIN, "mounted": [{"mountPath": ["r"], "source": BUILTIN}]},
            {
                "root": BUILTIN,
                "mounted": [{"mountPath": ["r"], "workflowName": "r", "source": "x"}],
            },
        ],
    )
    def test_anything_else_is_refused_and_not_recorded(self, fx: Fixture, source: object) -> None:
        """Text and malformed objects: ``rejected`` with the original's error, nothing stored."""
        before = fx.events()
        response = _start(fx, source)
        assert ("rejected", INVALID) == (response.outcome, response.error)
        assert before == fx.events()
        assert 0 == fx.count("host_commands")
        assert 0 == fx.count("runs")


class TestAdoption:
    def test_an_equivalent_form_is_adopted(self, fx: Fixture) -> None:
        """A bare identity and ``{root, mounted:[]}`` are the same source (normalised compare)."""
        assert "accepted" == _start(fx, BUILTIN, key="s-1").outcome
        again = _start(fx, {"root": BUILTIN, "mounted": []}, key="s-2")
        assert ("adopted", {"runId": "run-1", "status": "queued"}) == (again.outcome, again.receipt)

    def test_the_same_key_with_another_form_is_a_key_reuse_conflict(self, fx: Fixture) -> None:
        """The fingerprint covers the source as sent (HOST.md §5.4)."""
        assert "accepted" == _start(fx, BUILTIN, key="s-1").outcome
        again = _start(fx, {"root": BUILTIN, "mounted": []}, key="s-1")
        assert ("conflict", "Idempotency key was reused with another payload") == (
            again.outcome,
            again.error,
        )

    @pytest.mark.parametrize(
        "changes",
        [
            {"workflowSource": {**BUILTIN, "revision": "other"}},
            {"workflowSource": SET},
            {"workflowName": "other"},
            {"workflowSourceRef": "builtin:other"},
            {"definitionDigest": "d2"},
            {"input": {"n": 1}},
            {"launchOptions": {"fast": True}},
            {"originSessionId": "s-2"},
            {"executionMode": "headless"},
        ],
    )
    def test_any_other_difference_conflicts(self, fx: Fixture, changes: dict[str, object]) -> None:
        """``Workflow run preparation conflicts: {runId}``, thrown: nothing is recorded."""
        assert "accepted" == _start(fx, BUILTIN, key="s-1").outcome
        before = fx.events()
        payload = {**START, "workflowSource": BUILTIN, **changes}
        response = fx.request("run.start", payload, run_id="run-1", key="s-2")
        assert ("rejected", "Workflow run preparation conflicts: run-1") == (
            response.outcome,
            response.error,
        )
        assert before == fx.events()
        assert 1 == fx.count("host_commands")
