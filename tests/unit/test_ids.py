"""Derived identifiers and fingerprints equal the original's examples (DOMAIN §4, §7.1, §12.1)."""

from pwf.commands import ids
from pwf.protocol.client import ClientRequest

SOURCE = "interaction-run-1-attempt-1"
FAILED: dict[str, object] = {
    "error": "boom",
    "finalOutput": None,
    "input": {},
    "reason": None,
    "status": "failed",
    "workflowRef": "builtin:echo",
}
TERMINAL_FINGERPRINT = "96eeb2504de7d6d9f3b48c7fb61a8db885d657d807eb63a3b5a2c47f069ac4b9"
TERMINAL_MESSAGE = (
    "workflow-message-21fc3503db23d2995a9f7d36502465d90b8a1200307e9813372b3a0913069e0f"
)


class TestDerivedIds:
    def test_step_message_id(self):
        """The step message of fixture F is M1 (§4 example)."""
        expected = (
            "workflow-message-ef38de41cf51c92267369039a7055ee78bd9045683835c11b94831c4844bdffa"
        )
        assert expected == ids.message_id("step", SOURCE, ids.message_key(1, "initial"))

    def test_reopened_step_message_id(self):
        """A reopened request's ``3:resumed`` message has scenario 27's id."""
        expected = (
            "workflow-message-3346315143ce97ffec29073767b298a8b20d19bdecf61bc91c7f534f646adb12"
        )
        assert expected == ids.message_id("step", SOURCE, "3:resumed")

    def test_resumed_message_after_idle_report(self):
        """The ``2:resumed`` message of scenario 32."""
        expected = (
            "workflow-message-3d314f2a86be8d39cd38f0654cf44c419acf1333e1fd469f4b8bbcd1c1366e59"
        )
        assert expected == ids.message_id("step", SOURCE, "2:resumed")

    def test_interaction_request_id(self):
        """Agent requests are named after run and attempt."""
        assert SOURCE == ids.interaction_request_id("run-1", "attempt-1")

    def test_terminal_fingerprint_and_message(self):
        """Missing facts count as null; the message keys on the fingerprint (§12.1)."""
        assert TERMINAL_FINGERPRINT == ids.terminal_fingerprint(FAILED)
        partial = {key: value for key, value in FAILED.items() if value is not None}
        assert TERMINAL_FINGERPRINT == ids.terminal_fingerprint(partial)
        source = ids.terminal_source_id("run-1")
        assert TERMINAL_MESSAGE == ids.message_id("terminal", source, TERMINAL_FINGERPRINT)

    def test_restart_run_id(self):
        """Scenario 49's restart run id comes from the terminal message id."""
        expected = "restart-313587807a0de288a46cb23ec054460202f652d8"
        assert expected == ids.restart_run_id(TERMINAL_MESSAGE)

    def test_session_request_id(self):
        """Scenario 58's follow-up request id."""
        expected = "session-70f7519c3c2b160b041d21ef1ba353d418a9267dd1cf5608553ebed5c3e3fec7"
        assert expected == ids.session_request_id("cli-A", "fu-1")

    def test_continuation_run_id(self):
        """A leading ``decision-`` is dropped; other ids are kept whole."""
        assert "continuation-abc" == ids.continuation_run_id("decision-abc")
        assert "continuation-abc" == ids.continuation_run_id("abc")

    def test_notification_id(self):
        """Notifications are numbered per attempt."""
        assert "notification-run-1-attempt-1-2" == ids.notification_id("run-1", "attempt-1", 2)


class TestRequestFingerprint:
    def test_a7_fingerprint_ignores_request_id(self):
        """§7.1: the request id is removed before hashing; the payload counts."""
        base = {
            "client_id": "client-1",
            "idempotency_key": "status-1",
            "operation": "host.status",
            "payload": {},
        }
        one = ClientRequest(request_id="request-1", **base)  # type: ignore[arg-type]
        two = ClientRequest(request_id="request-2", **base)  # type: ignore[arg-type]
        changed = ClientRequest(request_id="request-1", **{**base, "payload": {"changed": True}})  # type: ignore[arg-type]
        expected = "c5b58e1545e811b2c08997cf42f88cf7cc8ae4a6e82c47d97fadb29fa3731493"
        assert (expected, expected) == (one.fingerprint, two.fingerprint)
        assert (
            "618c2f6cb9ee3dacbd5fb45c6eb074a70125a928107dfb823359517fc1b83925"
            == changed.fingerprint
        )
