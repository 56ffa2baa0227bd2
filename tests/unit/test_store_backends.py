"""No module above the store names a backend class (ADR 0088).

The rooms above :mod:`pwf.store` open a store through
:mod:`pwf.store.opening` and type it against the port; the store decides
how it runs a unit of work (ADR 0087).  This walks the syntax tree of every
module of ``src/pwf`` outside ``pwf/store`` and fails on any name of a
backend class: imported, used in an annotation, or reached as an attribute.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

SRC: Final = Path(__file__).resolve().parents[2] / "src" / "pwf"

BACKENDS: Final = frozenset(
    {
        "Mirror",
        "MirroredStore",
        "PostgresStore",
        "PostgresTransaction",
        "SqliteFile",
        "SqliteReads",
        "SqliteStore",
        "SqliteTransaction",
    }
)
"""The classes of :mod:`pwf.store`'s backends (SQLite, PostgreSQL, the mirror)."""

ALLOWED: Final[dict[str, frozenset[str]]] = {
    # The `pwf log` verbs on a shared log (export, import, the audit of a
    # shared log) are typed against the PostgreSQL log they were given by
    # open_log, the one place above the store that opens a log by URL.
    "cli/_options.py": frozenset({"PostgresStore"}),
    # The audit verbs read the Merkle tree's own tables through the SQLite
    # file that holds them (ADR 0083); pwf.store.opening.sqlite_file gives it.
    "cli/audit.py": frozenset({"SqliteStore"}),
}
"""Modules that may name a backend class, and which (each with its reason)."""


def _named(tree: ast.AST) -> set[str]:
    """Every backend class ``tree`` names: imports, names and attributes."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.update(alias.name for alias in node.names if alias.name in BACKENDS)
        elif isinstance(node, ast.Name) and node.id in BACKENDS:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in BACKENDS:
            found.add(node.attr)
    return found


def _modules() -> list[Path]:
    return sorted(path for path in SRC.rglob("*.py") if path.relative_to(SRC).parts[0] != "store")


def test_no_module_above_the_store_names_a_backend_class() -> None:
    """Each backend class named outside ``pwf.store`` is on the allow-list, with its reason."""
    wrong = {}
    for path in _modules():
        where = path.relative_to(SRC).as_posix()
        named = _named(ast.parse(path.read_text(encoding="utf-8"))) - ALLOWED.get(where, set())
        if named:
            wrong[where] = sorted(named)
    assert {} == wrong


def test_the_allow_list_holds_only_what_is_still_named() -> None:
    """An entry nobody needs any more is taken off, so the list only shrinks."""
    for where, names in ALLOWED.items():
        assert names <= _named(ast.parse((SRC / where).read_text(encoding="utf-8"))), where


def test_the_check_finds_each_way_of_naming_a_class() -> None:
    """An import, a name in an annotation, an attribute: each is found."""
    source = (
        "from pwf.store.sqlite import SqliteStore\n"
        "def f(x: 'int', y: MirroredStore) -> None: ...\n"
        "import pwf.store.postgres\n"
        "z = pwf.store.postgres.PostgresStore\n"
    )
    assert {"SqliteStore", "MirroredStore", "PostgresStore"} == _named(ast.parse(source))
