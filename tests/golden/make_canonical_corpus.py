"""Regenerate tests/golden/canonical_corpus.jsonl from Node, never from pwf.

Run by hand only; it needs `node` (12 or later) on PATH::

    .venv/bin/python tests/golden/make_canonical_corpus.py          # check the corpus
    .venv/bin/python tests/golden/make_canonical_corpus.py --write  # rewrite it

Each corpus line is ``{"name": …, "input": …, "hex": …}``: ``input`` is the
value as ``json.dumps(value, ensure_ascii=True)`` (lone surrogates survive as
``\\udxxx`` escapes, doubles as their exact repr) and ``hex`` the UTF-8 bytes
of what the original writes for it: a copy into fresh objects with keys
inserted in default-sort order, then ``JSON.stringify``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).with_name("canonical_corpus.jsonl")

# The same normalisation as the oracle in tests/unit/test_canonical_properties.py.
NODE_ORACLE = r"""
"use strict";
function normalise(value) {
  if (Array.isArray(value)) return value.map(normalise);
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new Error("JSON numbers must be finite");
  }
  if (value !== null && typeof value === "object") {
    const copy = {};
    for (const key of Object.keys(value).sort()) {
      if (value[key] !== undefined) copy[key] = normalise(value[key]);
    }
    return copy;
  }
  return value;
}
const input = require("fs").readFileSync(0, "utf8");
const answers = input.split("\n").filter((line) => line !== "").map((line) => {
  const text = JSON.stringify(normalise(JSON.parse(line)));
  return Buffer.from(text, "utf8").toString("hex");
});
process.stdout.write(JSON.stringify(answers));
"""

ALL_CONTROLS = "".join(chr(code) for code in range(0x20))

CASES: list[tuple[str, object]] = [
    # scalars and empty containers
    ("null", None),
    ("true", True),
    ("false", False),
    ("empty string", ""),
    ("empty object", {}),
    ("empty array", []),
    ("empty containers nested", {"a": [], "b": {}, "c": [{}, []]}),
    # number formatting regimes and their boundaries
    ("zero", 0),
    ("negative zero", -0.0),
    ("one as float", 1.0),
    ("hundred", 100),
    ("1e21 switches to exponent", 1e21),
    ("1e21 as int", 10**21),
    ("just below 1e21", 999999999999999900000.0),
    ("1e20 stays plain", 1e20),
    ("21 significant digits", 123456789012345678901),
    ("2e21", 2e21),
    ("1e-6 stays plain", 1e-6),
    ("1e-7 switches to exponent", 1e-7),
    ("negative 1e-7", -1e-7),
    ("9.99e-7", 9.99e-7),
    ("1.5e-6", 1.5e-6),
    ("123e-20", 123e-20),
    ("smallest subnormal", 5e-324),
    ("negative smallest subnormal", -5e-324),
    ("smallest normal", 2.2250738585072014e-308),
    ("largest double", 1.7976931348623157e308),
    ("1.5e300", 1.5e300),
    ("0.1 plus 0.2", 0.1 + 0.2),
    ("0.1", 0.1),
    ("2**53", 2**53),
    ("2**53 plus 1 rounds", 2**53 + 1),
    ("negative 2**53 minus 1 rounds", -(2**53) - 1),
    ("2**64", 2**64),
    ("1e16 as float", 1e16),
    ("half above 2**52 rounds to even", 4503599627370497.5),
    ("plain fraction", 123456.789),
    ("negative plain fraction", -0.000123),
    ("scenario A.2 array", [1e21, 1e-7, -0.0, 0.1, 100, 1.5e300, 123456789012345678901, 1e20]),
    # key order
    ("array-index keys first", {"b": 1, "10": 2, "2": 3, "01": 4, "-1": 5}),
    ("largest array index", {"4294967295": 1, "4294967294": 2, "0": 3, "a": 4}),
    ("index zero and leading zeros", {"00": 1, "0": 2, "007": 3, "7": 4}),
    ("scenario A.1 keys", {"\uffff": 1, "\U00010000": 2, "": 3, "a": 4, "B": 5, "\u00e9": 6}),
    (
        "UTF-16 order around the surrogates",
        {"\ue000": 1, "\ud7ff": 2, "\uffff": 3, "\U00010000": 4},
    ),
    ("astral keys among themselves", {"\U0010ffff": 1, "\U0001f600": 2, "\U00010000": 3}),
    ("case and empty keys", {"b": 1, "B": 2, "": 3, "a": 4, "A": 5}),
    # chr() because ruff (F601) takes distinct lone-surrogate literals for one key
    ("lone surrogate keys", {chr(0xDC00): 1, chr(0xD800): 2, "\U00010000": 3, "\uffff": 4}),
    ("escaped keys", {'"': 1, "\\": 2, "\n": 3, "\x00": 4}),
    # string escaping
    ("all controls", ALL_CONTROLS),
    ("DEL, line and paragraph separators, solidus", "\x7f\u2028\u2029/"),
    ("quotes and backslashes", 'say "hi" \\ bye \\"'),
    ("lone high surrogate", "\ud800"),
    ("lone low surrogate", "\udfff"),
    ("surrogate pair", "\U0001f600"),
    ("reversed pair stays two lone halves", "\ude00\ud83d"),
    ("high surrogate then text", "a\udbffb"),
    ("scenario A.3 string", '\x00\x1f"\\/\u2028\ud800\x7f\b\f\n\r\t'),
    ("non-ASCII raw", "caf\u00e9 \u65e5\u672c \U0001f389"),
    # __proto__
    ("__proto__ member vanishes", {"__proto__": 1, "a": 1}),
    ("__proto__ object vanishes", {"__proto__": {"x": 1}, "b": 2}),
    ("__proto__ null vanishes", {"__proto__": None}),
    ("nested __proto__", {"a": [{"__proto__": [1, 2], "z": 0}], "__proto__x": 1}),
    # nesting
    ("nested mixed", {"z": [1, {"y": [True, None, "x"], "1": 1.5}], "a": {"0": [], "k": -0.0}}),
    ("deep arrays", [[[[[[[[[["deep"]]]]]]]]]]),
    (
        "fingerprint request",
        {
            "clientId": "client-1",
            "idempotencyKey": "status-1",
            "operation": "host.status",
            "payload": {},
            "schema": "pi-workflows.client.v1",
            "type": "request",
        },
    ),
]


def run_node(inputs: list[str]) -> list[str]:
    """Canonicalise every input with Node in one process; return the hex answers."""
    node = shutil.which("node")
    if node is None:
        sys.exit("node is not on PATH")
    result = subprocess.run(
        [node, "-e", NODE_ORACLE],
        input="".join(line + "\n" for line in inputs),
        capture_output=True,
        text=True,
        check=True,
    )
    answers: list[str] = json.loads(result.stdout)
    return answers


def build() -> str:
    """The corpus text as Node writes it today."""
    inputs = [json.dumps(value, ensure_ascii=True) for _, value in CASES]
    lines = [
        json.dumps({"name": name, "input": text, "hex": answer}, ensure_ascii=True)
        for (name, _), text, answer in zip(CASES, inputs, run_node(inputs), strict=True)
    ]
    return "".join(line + "\n" for line in lines)


def main() -> int:
    """Check the stored corpus against Node, or rewrite it with --write."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the corpus file")
    text = build()
    if parser.parse_args().write:
        CORPUS.write_text(text, encoding="ascii")
        sys.stdout.write(f"wrote {len(CASES)} cases to {CORPUS}\n")
        return 0
    if CORPUS.exists() and CORPUS.read_text(encoding="ascii") == text:
        sys.stdout.write(f"{CORPUS.name} matches Node ({len(CASES)} cases)\n")
        return 0
    sys.stdout.write(f"{CORPUS.name} differs from Node; rerun with --write\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
