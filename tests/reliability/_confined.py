"""Run ``pwf ARGS`` under the limits a storage-fault test needs.

``python _confined.py LIMIT DROP ARGS...``: ``LIMIT`` is a file-size limit in
bytes (-1 for none) set with RLIMIT_FSIZE, with SIGXFSZ ignored so that a
write past it fails with EFBIG, as on a full disk, instead of killing the
process.  ``DROP`` of 1 first drops, from the capability bounding set, the
capabilities that let root ignore file permissions, then runs itself again:
after ``execve`` even root honours a file's mode, so a 0400 database is
read-only for it too.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from typing import Final

PR_CAPBSET_DROP: Final = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3


def drop_capabilities() -> None:
    """Remove root's file-permission bypass for every program this process executes."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            reason = os.strerror(ctypes.get_errno())
            sys.exit(f"cannot drop capability {capability}: {reason}")


def main(argv: list[str]) -> None:
    """Set the limits, then hand over to ``pwf``."""
    limit, drop, args = int(argv[1]), argv[2] == "1", argv[3:]
    if drop:
        drop_capabilities()
        again = [sys.executable, __file__, str(limit), "0", *args]
        os.execv(sys.executable, again)  # noqa: S606 - this script again, same interpreter
    if limit >= 0:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    sys.argv = ["pwf", *args]
    from pwf.cli import main as pwf  # noqa: PLC0415 - imported once the limits hold

    pwf()


if __name__ == "__main__":
    main(sys.argv)
