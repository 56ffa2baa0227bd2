"""The house's size budgets hold (issue 32's second step, ADR 0090, 0092, 0093).

No class of ``src/pwf`` runs over 250 lines, and at most five functions run
over 50: a room that outgrows them is split by job, not allowed to grow.
The lines counted are a definition's own, decorators excluded, docstrings
and comments included, as a reader sees them.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

SRC: Final = Path(__file__).resolve().parents[2] / "src" / "pwf"
CLASS_LINES: Final = 250
FUNCTION_LINES: Final = 50
LONG_FUNCTIONS: Final = 5


def _definitions() -> list[tuple[str, ast.AST, int]]:
    found: list[tuple[str, ast.AST, int]] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((f"{path.relative_to(SRC)}:{node.lineno} {node.name}", node, lines))
    return found


def test_no_class_runs_over_its_budget() -> None:
    over = [
        (where, lines)
        for where, node, lines in _definitions()
        if isinstance(node, ast.ClassDef) and lines > CLASS_LINES
    ]
    assert over == []


def test_at_most_five_functions_run_over_fifty_lines() -> None:
    over = [
        (where, lines)
        for where, node, lines in _definitions()
        if not isinstance(node, ast.ClassDef) and lines > FUNCTION_LINES
    ]
    assert len(over) <= LONG_FUNCTIONS, over


def test_the_walk_sees_the_tree() -> None:
    """The budgets are measured over the real tree, not an empty one."""
    definitions = _definitions()
    assert len(definitions) > 1_000
    assert any(where.startswith("server/_writer.py") for where, _node, _lines in definitions)
