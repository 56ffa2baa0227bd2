"""One start identity for the host's lock, the worker registry and orphan reaping (HOST §1.4)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import pwf
from pwf import server
from pwf.server import _lockfile
from pwf.server.supervision import identity, registry, start_identity
from pwf.server.supervision.identity import parent_pid


def test_linux_identity_is_field_22_of_proc_stat() -> None:
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    ticks = stat[stat.rfind(")") + 2 :].split()[19]
    assert start_identity(os.getpid()) == f"linux-proc-start:{ticks}"


def test_the_host_lock_uses_the_same_identity_as_the_registry() -> None:
    assert vars(server)["start_identity"] is start_identity is identity.start_identity
    assert vars(_lockfile)["alive"] is vars(registry)["alive"] is identity.alive


def test_only_the_identity_room_reads_proc() -> None:
    """One reader of ``/proc/PID/stat`` and ``ps``: the start identity and the parent agree."""
    root = Path(pwf.__file__).parent
    readers = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "/proc/" in path.read_text(encoding="utf-8")
        or '"/bin/ps"' in path.read_text(encoding="utf-8")
    )
    assert readers == ["server/supervision/identity.py"]


def test_the_parent_comes_from_the_same_stat_as_the_identity() -> None:
    assert parent_pid(os.getpid()) == os.getppid()
    child = subprocess.Popen(["true"])
    child.wait()
    assert parent_pid(child.pid) is None


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


@pytest.mark.skipif(shutil.which("ps") is None, reason="needs ps")
def test_without_proc_the_parent_comes_from_ps(monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.read_text

    def no_proc(self: Path, *args: object, **kwargs: object) -> str:
        if str(self).startswith("/proc/"):
            raise FileNotFoundError(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", no_proc)
    assert parent_pid(os.getpid()) == os.getppid()
