"""One start identity for the host's lock, the worker registry and orphan reaping (HOST §1.4)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pwf.server import _lockfile
from pwf.supervise import start_identity


def test_linux_identity_is_field_22_of_proc_stat() -> None:
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    ticks = stat[stat.rfind(")") + 2 :].split()[19]
    assert start_identity(os.getpid()) == f"linux-proc-start:{ticks}"


def test_the_host_lock_uses_the_same_identity_as_the_registry() -> None:
    assert _lockfile.start_identity is start_identity


def test_a_gone_process_has_no_identity() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert start_identity(child.pid) is None


@pytest.mark.skipif(shutil.which("ps") is None, reason="needs ps")
def test_without_proc_the_identity_comes_from_ps(monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.read_text

    def no_proc(self: Path, *args: object, **kwargs: object) -> str:
        if str(self).startswith("/proc/"):
            raise FileNotFoundError(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", no_proc)
    identity = start_identity(os.getpid())
    assert identity is not None
    assert identity.startswith("ps-lstart:")
    assert len(identity) > len("ps-lstart:")
