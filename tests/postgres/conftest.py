"""Tests of the PostgreSQL store; collected only where psycopg (the ``postgres`` extra) is.

Without psycopg the contract suite's ``postgresql`` cases skip (and fail
under CI), so a missing extra is still reported.
"""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("psycopg") else ["test_*.py"]
