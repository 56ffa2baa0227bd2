"""The Python API's page runs as written (``docs/api.md``, read by :mod:`doctest`).

The page's examples share one namespace, in order: a database in this
process, a read-only log reader, then a served host's client, for which
the test starts ``pwf serve`` on ``served/state.db`` as the page says.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import pwf

if TYPE_CHECKING:
    from tests.integration._served import Served, init, short_dir
else:
    from _served import Served, init, short_dir

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_example_of_the_api_page_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    with short_dir() as directory:
        monkeypatch.chdir(directory)
        (directory / "served").mkdir()
        init(directory / "served" / "state.db")
        host = Served(directory / "served" / "state.db")
        try:
            failed, tried = doctest.testfile(
                str(PAGE), module_relative=False, raise_on_error=False, report=True, verbose=False
            )
        finally:
            assert 0 == host.terminate()
    assert tried > 20
    assert 0 == failed


def test_the_api_is_exported_from_pwf_with_its_all() -> None:
    """Every export is what it names, even after the command line's modules were imported.

    A submodule of the same name as an export would replace it once imported
    (``pwf call``'s module was ``pwf.call``); none has one.
    """
    import pwf.callhost  # noqa: PLC0415 - imported as ``pwf call`` imports it
    import pwf.cli.call  # noqa: PLC0415

    for name in pwf.__all__:
        assert importlib.util.find_spec(f"pwf.{name}") is None, name
    for name in ("Database", "LogReader", "HostClient", "call", "request_message", "Entry"):
        assert name in pwf.__all__
        assert getattr(pwf, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = pwf.Nope


def test_import_pwf_loads_none_of_the_api() -> None:
    """The exports are lazy: ``import pwf`` imports no other pwf module, nor msgspec or typing."""
    probe = (
        "import sys, pwf\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pwf.', 'msgspec', 'typing'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, env=os.environ
    ).stdout.decode()
    assert "[]" == out.strip()


def test_call_without_a_host_says_so_once_its_retry_time_is_spent(tmp_path: Path) -> None:
    from pwf.client import HostUnavailableError, socket_path  # noqa: PLC0415

    request = pwf.request_message("host.status", request_id="r-1")
    with pytest.raises(HostUnavailableError, match="no workflow host answers on"):
        pwf.call(socket_path(tmp_path / "state.db"), request, retry_for=0)


def test_the_served_host_answers_fit_their_receipt_types() -> None:
    """What only a served host answers (its host.status, the watches) fits the documented types."""
    import msgspec  # noqa: PLC0415

    from pwf.artifacts import EXAMPLES  # noqa: PLC0415
    from pwf.protocol.schemas import OPERATION_TYPES  # noqa: PLC0415

    payloads = {example.operation: example for example in EXAMPLES}
    served = ("host.status", "run.start", "view.runs.watch", "view.run.watch", "view.run.unwatch")
    with short_dir() as directory:
        init(directory / "state.db")
        host = Served(directory / "state.db")
        try:
            with host.client() as client:
                for number, operation in enumerate(served):
                    example = payloads[operation]
                    request = pwf.request_message(
                        operation, example.payload, request_id=f"r-{number}", run_id=example.run_id
                    )
                    answer = client.request(request)
                    assert "accepted" == answer["outcome"], answer
                    receipt_type = OPERATION_TYPES[operation].receipt
                    assert receipt_type is not None
                    msgspec.convert(answer["receipt"], receipt_type, strict=True)
        finally:
            assert 0 == host.terminate()
