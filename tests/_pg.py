"""A throwaway PostgreSQL server for tests and benchmarks, started from the machine's packages.

Nothing assumes a server that is already running: :class:`Server` runs
``initdb`` into a temporary folder, starts ``postgres`` listening on a Unix
socket in that folder only (no TCP port, so parallel runs cannot collide),
and stops and deletes it all at the end.  PostgreSQL refuses to run as root,
so as root the server runs as the system user ``postgres`` that Debian's
package creates (through ``runuser``).  :func:`find_bin` finds the binaries
under ``/usr/lib/postgresql/*/bin`` (or ``$PWF_PG_BIN``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MISSING", "Server", "find_bin", "sweep_orphans"]

MISSING: Final = "PostgreSQL is not installed (apt-get install postgresql, or set $PWF_PG_BIN)"
PREFIX: Final = "pwf-pg-"
OWNER: Final = "owner.pid"
"""The process that started a cluster; once it is gone, the next start stops the cluster."""
USER: Final = "postgres"
"""The unprivileged system user the server runs as when the tests run as root."""


def find_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: ``$PWF_PG_BIN``, else the newest Debian one."""
    given = os.environ.get("PWF_PG_BIN")
    if given:
        return Path(given) if (Path(given) / "initdb").exists() else None
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(bin_dir: Path) -> None:
    """Stop and delete the clusters whose starting process died without stopping them.

    A run killed outright (SIGKILL, a timeout) never reaches
    :meth:`Server.stop`; its server would otherwise run until the machine stops.
    """
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            owner = int((root / OWNER).read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        runner = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                [
                    *runner,
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(root / "data"),
                    "-m",
                    "immediate",
                    "stop",
                ],
                check=False,
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)


class Server:
    """One PostgreSQL cluster in a temporary folder, reachable through its Unix socket."""

    def __init__(
        self, bin_dir: Path, *, durable: bool = False, settings: Sequence[str] = ()
    ) -> None:
        """Prepare (not start) a cluster; ``durable`` keeps fsync on, as a benchmark needs.

        ``settings`` are more ``name=value`` server settings.
        """
        self.bin_dir = bin_dir
        self.durable = durable
        self.settings = [f"-c {setting}" for setting in settings]
        sweep_orphans(bin_dir)
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX))
        self.data = self.root / "data"
        self.socket = self.root / "socket"
        self._databases = 0
        self._as: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as = ["runuser", "-u", USER, "--"]
        self.root.chmod(0o700)
        (self.root / OWNER).write_text(str(os.getpid()))

    def _run(self, *command: str) -> None:
        subprocess.run(
            [*self._as, *command],
            check=True,
            capture_output=True,
            cwd=self.root,
            timeout=120,
        )

    def start(self) -> None:
        """Create the cluster and start the server (waits until it accepts connections)."""
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "pwf",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        self._run("mkdir", "-m", "0700", str(self.socket))
        settings = [
            "-c listen_addresses=''",
            f"-c unix_socket_directories={self.socket}",
            "-c max_connections=60",
        ]
        if not self.durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self.settings = settings + self.settings
        self.restart()

    def crash(self) -> None:
        """Stop the server as a crash would: at once, without writing out what it buffers."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")

    def restart(self) -> None:
        """Start the server on its cluster (it recovers from its WAL after a crash)."""
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            " ".join(self.settings),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def url(self, database: str = "postgres") -> str:
        """A connection URL for ``database`` over the server's socket."""
        return f"postgresql://pwf@/{database}?host={self.socket}"

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg  # noqa: PLC0415 - an optional dependency, needed only here

        self._databases += 1
        name = f"pwf_test_{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once and delete its folder."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
