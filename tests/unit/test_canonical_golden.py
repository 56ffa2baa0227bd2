"""The golden corpus: pwf.canonical against bytes Node wrote (see make_canonical_corpus.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pwf.canonical import encode, parse_line

CORPUS = Path(__file__).parents[1] / "golden" / "canonical_corpus.jsonl"


def _load() -> list[dict[str, Any]]:
    with CORPUS.open(encoding="ascii") as lines:
        return [json.loads(line) for line in lines]


CASES = _load()


def test_corpus_covers_the_tricky_cases() -> None:
    """The corpus holds the expected number of uniquely named cases."""
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names))
    assert len(names) >= 60


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_encode_matches_node_bytes(case: dict[str, Any]) -> None:
    """Encoding the corpus input yields exactly the bytes Node wrote."""
    expected = bytes.fromhex(case["hex"])
    assert expected == encode(json.loads(case["input"]))


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_parse_line_accepts_node_bytes(case: dict[str, Any]) -> None:
    """Node's output is a canonical line that parses and re-encodes to itself."""
    expected = bytes.fromhex(case["hex"])
    assert expected == encode(parse_line(expected))
