"""``run.start`` ``workflowSource``: a source identity or ``{root, mounted}`` (HOST.md §5).

The original's queue store accepts only an object: a single identity
``{kind:"builtin", id, revision}`` or ``{kind:"file", path, hash}``, normalised
to ``{root, mounted:[]}``, or a source set ``{root, mounted:[{mountPath,
workflowName, source}]}``.  Anything else, text included, is refused.  The
normalised object is kept in the ``run.reserved`` event and projected into
``run_sources`` rows (root ``''``, mounted paths joined with ``/``); reading
them back rebuilds ``{root, mounted}``, which adoption compares and the
launch envelope carries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pwf.commands import refuse
from pwf.commands.rows import RunSourceRow, select
from pwf.projections.run_sources import SOURCE_FIELDS

if TYPE_CHECKING:
    from pwf.commands import Context

__all__ = ["INVALID_SOURCE", "normalised_source", "stored_source"]

INVALID_SOURCE: Final = "Stored workflow source identity is invalid"


def _identity(value: object) -> bool:
    """Whether ``value`` is a builtin or file source identity (all members text)."""
    if not isinstance(value, dict):
        return False
    kind = value.get("kind")
    fields = SOURCE_FIELDS.get(kind) if isinstance(kind, str) else None
    return fields is not None and all(isinstance(value.get(name), str) for name in fields)


def _mount(value: object) -> bool:
    """Whether ``value`` is a mounted source ``{mountPath:[text…], workflowName, source}``."""
    if not isinstance(value, dict):
        return False
    path = value.get("mountPath")
    return (
        isinstance(path, list)
        and all(isinstance(part, str) for part in path)
        and isinstance(value.get("workflowName"), str)
        and _identity(value.get("source"))
    )


def normalised_source(value: object) -> dict[str, object]:
    """The ``{root, mounted}`` form of a ``workflowSource`` as the original normalises it.

    Raises:
        CommandError: the value is neither an identity nor a source set.
    """
    if _identity(value):
        return {"mounted": [], "root": value}
    if isinstance(value, dict) and _identity(value.get("root")):
        mounted = value.get("mounted")
        if isinstance(mounted, list) and all(_mount(item) for item in mounted):
            return {"mounted": mounted, "root": value["root"]}
    raise refuse(INVALID_SOURCE)


_SOURCES: Final = select(RunSourceRow, "WHERE run_id = ? ORDER BY mount_path")


def _identity_of(row: RunSourceRow) -> dict[str, object]:
    kind = row.source_type
    ref, revision = SOURCE_FIELDS[kind]
    return {"kind": kind, ref: row.source_ref, revision: row.source_revision}


def _mount_names(snapshot: object) -> dict[str, str]:
    """``composition.mounts`` of a definition snapshot: mount path -> workflow name."""
    composition = snapshot.get("composition") if isinstance(snapshot, dict) else None
    mounts = composition.get("mounts") if isinstance(composition, dict) else None
    names: dict[str, str] = {}
    for mount in mounts if isinstance(mounts, list) else []:
        path = mount.get("mountPath") if isinstance(mount, dict) else None
        name = mount.get("workflowName") if isinstance(mount, dict) else None
        if isinstance(path, list) and isinstance(name, str):
            names["/".join(str(part) for part in path)] = name
    return names


def stored_source(ctx: Context, run_id: str, snapshot: object) -> dict[str, object] | None:
    """A run's ``{root, mounted}`` read back from ``run_sources``; None when it has no rows.

    Mounted entries come in ``mount_path`` order; their ``workflowName`` is the
    definition snapshot's ``composition.mounts`` name, else the joined path.
    """
    rows = ctx.fetch_all(_SOURCES, run_id)
    if not rows or rows[0].mount_path != "":
        return None
    names = _mount_names(snapshot)
    mounted = [
        {
            "mountPath": row.mount_path.split("/"),
            "source": _identity_of(row),
            "workflowName": names.get(row.mount_path, row.mount_path),
        }
        for row in rows[1:]
    ]
    return {"mounted": mounted, "root": _identity_of(rows[0])}
