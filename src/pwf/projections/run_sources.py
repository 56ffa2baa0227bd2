"""``run_sources``: the workflow sources of each run, one row per mount (HOST.md §5.2).

A run's ``workflowSource`` arrives normalised to ``{root, mounted}`` in
``run.reserved``; the root is the row with mount path ``''`` and each mounted
source the row of its ``mountPath`` parts joined with ``/``.  ``source_ref``
is a builtin's ``id`` or a file's ``path``, ``source_revision`` its
``revision`` or ``hash``.  A run reserved while pwf still took the source as
text has no rows.  Its own read model, so a database written before it only
gains the empty table.
"""

from __future__ import annotations

from typing import Any, Final

from pwf import canonical
from pwf.events import Entry, RunReserved
from pwf.projections._sql import Statement, dispatch, each, handlers, pruned

NAME: Final = "run_sources"
VERSION: Final = 1

DDL: Final = (
    """CREATE TABLE IF NOT EXISTS run_sources (
  run_id TEXT NOT NULL,
  mount_path TEXT NOT NULL,
  source_type TEXT NOT NULL CHECK (source_type IN ('builtin', 'file')),
  source_ref TEXT NOT NULL,
  source_revision TEXT NOT NULL,
  PRIMARY KEY (run_id, mount_path)
) STRICT""",
)

SOURCE_FIELDS: Final = {"builtin": ("id", "revision"), "file": ("path", "hash")}
"""Per source type, the identity members kept as ``source_ref`` and ``source_revision``."""

_INSERT: Final = (
    "INSERT INTO run_sources (run_id, mount_path, source_type, source_ref, source_revision)"
    " VALUES (?, ?, ?, ?, ?)"
)


def source_rows(source: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The rows of a normalised source: (mount path, type, ref, revision), root first."""
    entries = [("", source["root"])]
    entries += [("/".join(item["mountPath"]), item["source"]) for item in source["mounted"]]
    rows = []
    for mount_path, identity in entries:
        ref, revision = SOURCE_FIELDS[identity["kind"]]
        rows.append((mount_path, identity["kind"], identity[ref], identity[revision]))
    return rows


def _reserved(event: RunReserved, _at: int) -> list[Statement]:
    source = canonical.decode(event.workflow_source)
    if not isinstance(source, dict):
        return []  # reserved with text, before sources were objects
    return [(_INSERT, (event.run_id, *row)) for row in source_rows(source)]


HANDLERS: Final = handlers(
    each(RunReserved, _reserved), pruned("DELETE FROM run_sources WHERE run_id IN ({})")
)
"""Each event class this read model folds, with its handler."""


def apply(entry: Entry) -> list[Statement]:
    """Keep the sources of reserved runs."""
    return dispatch(HANDLERS, entry)
