"""The live == rebuild state machine again, each example on a fresh shared PostgreSQL log.

The machine's store is a host's local file on the shared log (ADR 0038), so
every step's projections are folded locally from events that went through
PostgreSQL; its invariants verify the shared log's chain.  Pruning a copy
acts on the SQLite file itself, so that rule is left out here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings

if TYPE_CHECKING:
    from tests._pg import Server
    from tests.integration.test_state_machine import CommandPathMachine
else:
    from test_state_machine import CommandPathMachine


class SharedLogMachine(CommandPathMachine):
    """The command-path machine with its log in PostgreSQL."""

    server: ClassVar[Server | None] = None
    prune_a_copy = None  # type: ignore[assignment]  # acts on the SQLite file itself

    def __init__(self) -> None:
        assert self.server is not None, "the postgres_server fixture starts the server"
        os.environ["PWF_STORE"] = self.server.create_database()
        try:
            super().__init__()
        except BaseException:
            del os.environ["PWF_STORE"]
            raise
        assert self.store.log_file is None, "the machine runs on the shared log"

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            os.environ.pop("PWF_STORE", None)


SharedLogMachine.TestCase.settings = settings(
    max_examples=8,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


@pytest.fixture(autouse=True)
def _server(postgres_server: Any) -> None:
    """Hand the session's throwaway server to the machine."""
    SharedLogMachine.server = postgres_server


TestLiveEqualsRebuildOnPostgres = pytest.mark.slow(SharedLogMachine.TestCase)
