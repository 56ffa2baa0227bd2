"""Generated artifacts: ``events/*.schema.json`` and ``projections/*.sql``, with drift checks.

Imports events, projections, readmodel and the SQLite store.  Schemas come
from the msgspec Structs (the only schema source); DDL is exported as SQLite
itself stores it.  Files are never deleted: the log is forever, so the schema
of a retired event type stays.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

import msgspec

from pwf.events import EVENT_TYPES, Envelope
from pwf.projections import PROJECTIONS
from pwf.readmodel import ReadModel
from pwf.store.sqlite import SCHEMA

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["expected_artifacts", "sync_artifacts"]


def _schema_text(cls: type) -> str:
    return json.dumps(msgspec.json.schema(cls), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _ddl_text(statements: tuple[str, ...]) -> str:
    connection = sqlite3.connect(":memory:")
    try:
        for statement in SCHEMA:
            connection.execute(statement)
        before = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        for statement in statements:
            connection.execute(statement)
        rows = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name"
        ).fetchall()
    finally:
        connection.close()
    wanted = [sql for name, sql in rows if statements is SCHEMA or name not in before]
    return "".join(f"{sql};\n" for sql in wanted)


def expected_artifacts() -> dict[str, str]:
    """Relative path -> the exact text every generated file must have."""
    files = {"events/_envelope.schema.json": _schema_text(Envelope)}
    for cls in EVENT_TYPES:
        files[f"events/{cls.TAG}.schema.json"] = _schema_text(cls)
    files["projections/_pwf_store.sql"] = _ddl_text(SCHEMA)
    for projection in ReadModel(PROJECTIONS).projections:
        files[f"projections/{projection.NAME}.sql"] = _ddl_text(projection.DDL)
    return files


def sync_artifacts(root: Path, *, check: bool) -> list[str]:
    """Write (or with ``check`` only compare) the artifacts under ``root``; return drifted paths."""
    drifted: list[str] = []
    for relative, text in expected_artifacts().items():
        path = root / relative
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        drifted.append(relative)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return drifted
