"""pwf's Merkle proofs and signed notes checked by an implementation that is not pwf's (ADR 0083).

The RFC 9162 §2.1 algorithms are written here again, recursively and as the
RFC spells them (MTH, PATH, PROOF, and a verifier that recomputes the root
from the path by the same recursion), and compared with :mod:`pwf.merkle` on
every tree of 1 to 300 leaves and on random trees of up to 10**6 leaves.
Signed notes are checked with ``cryptography`` directly from the C2SP byte
forms.  No PyPI package implements C2SP notes for Python (``aics-tlog`` is
not published), so that side is written here too.
"""

from __future__ import annotations

import base64
import functools
import hashlib

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pwf import merkle
from pwf.cli import _notes
from pwf.errors import InputError


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than n (RFC 9162 §2.1.1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


class Reference:
    """RFC 9162 §2.1 over leaves ``leaf(i)``, recursively; big perfect subtrees memoised."""

    def __init__(self, leaf: object) -> None:
        self.leaf = leaf
        self.memo: dict[tuple[int, int], bytes] = {}

    def mth(self, lo: int, hi: int) -> bytes:
        n = hi - lo
        if n == 0:
            return _sha(b"")
        if n == 1:
            return _sha(b"\x00" + self.leaf(lo))  # type: ignore[operator]
        key = (lo, hi)
        if key in self.memo:
            return self.memo[key]
        k = _k(n)
        value = _sha(b"\x01" + self.mth(lo, lo + k) + self.mth(lo + k, hi))
        if n & (n - 1) == 0 and n >= 64:  # only big perfect subtrees are kept
            self.memo[key] = value
        return value

    def path(self, m: int, lo: int, hi: int) -> list[bytes]:
        n = hi - lo
        if n == 1:
            return []
        k = _k(n)
        if m < k:
            return [*self.path(m, lo, lo + k), self.mth(lo + k, hi)]
        return [*self.path(m - k, lo + k, hi), self.mth(lo, lo + k)]

    def proof(self, m: int, lo: int, hi: int, *, b: bool) -> list[bytes]:
        n = hi - lo
        if m == n:
            return [] if b else [self.mth(lo, hi)]
        k = _k(n)
        if m <= k:
            return [*self.proof(m, lo, lo + k, b=b), self.mth(lo + k, hi)]
        return [*self.proof(m - k, lo + k, hi, b=False), self.mth(lo, lo + k)]


def _root_from_path(leaf_hash: bytes, m: int, n: int, path: list[bytes]) -> bytes | None:
    """The root a PATH leads to, by the recursion that made it (None when the length is wrong)."""
    if n == 1:
        return leaf_hash if not path else None
    if not path:
        return None
    k = _k(n)
    *rest, last = path
    if m < k:
        left = _root_from_path(leaf_hash, m, k, rest)
        return None if left is None else _sha(b"\x01" + left + last)
    right = _root_from_path(leaf_hash, m - k, n - k, rest)
    return None if right is None else _sha(b"\x01" + last + right)


def _leaf(i: int) -> bytes:
    return i.to_bytes(8, "big")


def _pwf_tree(size: int) -> dict[int, bytes]:
    """The stored hashes pwf's append writes for ``size`` leaves, by position."""
    stored: dict[int, bytes] = {}
    frontier: list[bytes] = []
    for index in range(size):
        frontier, written = merkle.append_leaf(index, frontier, merkle.leaf_hash(_leaf(index)))
        for offset, value in enumerate(written):
            stored[merkle.leaf_position(index) + offset] = value
    return stored


SMALL = _pwf_tree(300)


def _lookup(level: int, index: int) -> bytes:
    return SMALL[merkle.node_position(level, index)]


def test_every_tree_of_1_to_300_leaves_has_the_reference_roots_and_paths() -> None:
    """Roots, every inclusion path and every consistency path equal the RFC's, and verify."""
    reference = Reference(_leaf)
    for n in range(1, 301):
        root = reference.mth(0, n)
        assert root == merkle.subtree_root(_lookup, 0, n)
        frontier = [_lookup(*node) for node in merkle.frontier_nodes(n)]
        assert root == merkle.root_from_frontier(frontier)
        for m in range(n):
            path = merkle.inclusion_path(_lookup, m, n)
            assert reference.path(m, 0, n) == path
            leaf = _sha(b"\x00" + _leaf(m))
            assert root == _root_from_path(leaf, m, n, path)
            assert merkle.verify_inclusion(leaf, m, n, path, root)
        for m in range(1, n + 1):
            path = merkle.consistency_path(_lookup, m, n)
            assert reference.proof(m, 0, n, b=True) == path
            assert merkle.verify_consistency(m, n, reference.mth(0, m), root, path)


def test_random_trees_up_to_a_million_leaves() -> None:
    """Random sizes up to 10**6: pwf's paths are the RFC's and verify (subtrees made on demand)."""
    draws = iter(range(1_000))

    def draw(low: int, high: int) -> int:  # a fixed pseudo-random sequence, from SHA-256
        digest = hashlib.sha256(b"%d" % next(draws)).digest()
        return low + int.from_bytes(digest[:8], "big") % (high - low + 1)

    reference = Reference(_leaf)

    @functools.cache
    def perfect(level: int, index: int) -> bytes:  # pwf's lookup, from the leaves
        if level == 0:
            return merkle.leaf_hash(_leaf(index))
        return merkle.node_hash(perfect(level - 1, 2 * index), perfect(level - 1, 2 * index + 1))

    for _ in range(12):
        n = draw(2, 10**6)
        root = reference.mth(0, n)
        assert root == merkle.subtree_root(perfect, 0, n)
        for m in (0, n - 1, draw(0, n - 1)):
            path = merkle.inclusion_path(perfect, m, n)
            assert reference.path(m, 0, n) == path
            assert merkle.verify_inclusion(merkle.leaf_hash(_leaf(m)), m, n, path, root)
        old = draw(1, n)
        path = merkle.consistency_path(perfect, old, n)
        assert reference.proof(old, 0, n, b=True) == path
        assert merkle.verify_consistency(old, n, reference.mth(0, old), root, path)


def _flips(data: bytes) -> list[bytes]:
    return [
        data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]
        for at in range(len(data))
        for bit in range(8)
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 31, 64, 100])
def test_every_single_bit_change_of_an_inclusion_proof_is_refused(n: int) -> None:
    """Any one bit of the leaf, the path, the root, the index or the size changed: refused."""
    root = merkle.subtree_root(_lookup, 0, n)
    for m in {0, n // 2, n - 1}:
        leaf = merkle.leaf_hash(_leaf(m))
        path = merkle.inclusion_path(_lookup, m, n)
        assert merkle.verify_inclusion(leaf, m, n, path, root)
        assert not any(merkle.verify_inclusion(bad, m, n, path, root) for bad in _flips(leaf))
        assert not any(merkle.verify_inclusion(leaf, m, n, path, bad) for bad in _flips(root))
        for at, item in enumerate(path):
            for bad in _flips(item):
                changed = [*path[:at], bad, *path[at + 1 :]]
                assert not merkle.verify_inclusion(leaf, m, n, changed, root)
        for bit in range(32):
            assert not merkle.verify_inclusion(leaf, m ^ (1 << bit), n, path, root)
        # A path does not bind the tree size by itself (leaf 0 of 5 and of 7 share one):
        # the signed checkpoint does, and tests/cli/test_cli_audit.py flips its bits.


@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 50, 300])
def test_every_single_bit_change_of_a_consistency_proof_is_refused(n: int) -> None:
    """Any one bit of either root, the path or either size changed: refused."""
    new_root = merkle.subtree_root(_lookup, 0, n)
    for m in {1, n // 2, n - 1}:
        if m < 1:
            continue
        old_root = merkle.subtree_root(_lookup, 0, m)
        path = merkle.consistency_path(_lookup, m, n)
        assert merkle.verify_consistency(m, n, old_root, new_root, path)
        assert not any(merkle.verify_consistency(m, n, b, new_root, path) for b in _flips(old_root))
        assert not any(merkle.verify_consistency(m, n, old_root, b, path) for b in _flips(new_root))
        for at, item in enumerate(path):
            for bad in _flips(item):
                changed = [*path[:at], bad, *path[at + 1 :]]
                assert not merkle.verify_consistency(m, n, old_root, new_root, changed)
        for bit in range(32):
            assert not merkle.verify_consistency(m ^ (1 << bit), n, old_root, new_root, path)
        # The new size is bound by the signed checkpoint of the new tree (as above).


# ------------------------------------------------------------------ signed notes, by hand


def _their_key_id(name: str, kind: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public).digest()[:4]


def _their_verify(note: str, vkey: str) -> tuple[str, str, bytes]:
    """Check a checkpoint note as C2SP writes it; its origin, size line and root."""
    name, keyid, key = vkey.split("+", 2)
    raw = base64.b64decode(key)
    assert raw[0] == 0x01
    assert bytes.fromhex(keyid) == _their_key_id(name, 1, raw[1:])
    text, _, signatures = note.partition("\n\n")
    text += "\n"
    assert signatures.endswith("\n")
    [line] = signatures[:-1].split("\n")
    dash, signer, signature = line.split(" ")
    assert (dash, signer) == ("\u2014", name)
    blob = base64.b64decode(signature)
    assert blob[:4] == bytes.fromhex(keyid)
    Ed25519PublicKey.from_public_bytes(raw[1:]).verify(blob[4:], text.encode())
    origin, size, root, end = text.split("\n")
    assert end == ""
    return origin, size, base64.b64decode(root)


def test_a_checkpoint_is_a_c2sp_signed_note_checked_by_hand() -> None:
    """The key id, vkey and signature follow C2SP signed-note and tlog-checkpoint byte for byte."""
    key = _notes.new_key("example.com/log", _notes.LOG_KEY)
    vkey = str(key.verifier)
    root = merkle.subtree_root(_lookup, 0, 300)
    note = _notes.sign_note(
        _notes.checkpoint_text(_notes.Checkpoint("example.com/a", 300, root)), key
    )
    assert note.startswith(f"example.com/a\n300\n{base64.b64encode(root).decode()}\n\n\u2014 ")
    assert ("example.com/a", "300", root) == _their_verify(note, vkey)


def test_a_cosignature_is_c2sp_tlog_cosignature_v1_checked_by_hand() -> None:
    """The witness's line: key id over type 0x04, big-endian time, Ed25519 of the v1 message."""
    log = _notes.new_key("example.com/log", _notes.LOG_KEY)
    witness = _notes.new_key("witness.example/w1", _notes.COSIGNER)
    text = _notes.checkpoint_text(_notes.Checkpoint("example.com/a", 3, bytes(32)))
    note = _notes.add_cosignature(_notes.sign_note(text, log), witness, 1_700_000_000)
    line = note.splitlines()[-1]
    _, name, signature = line.split(" ")
    blob = base64.b64decode(signature)
    public = witness.verifier.public
    assert name == "witness.example/w1"
    assert blob[:4] == _their_key_id(name, 0x04, public)
    assert 1_700_000_000 == int.from_bytes(blob[4:12], "big")
    message = f"cosignature/v1\ntime 1700000000\n{text}".encode()
    Ed25519PublicKey.from_public_bytes(public).verify(blob[12:], message)
    assert [(witness.verifier, 1_700_000_000)] == _notes.cosignatures(note, [witness.verifier])


def test_every_single_bit_change_of_a_signed_checkpoint_is_refused() -> None:
    """Each bit of the note, text or signature, flipped: pwf refuses it; so does the hand check.

    The hand check decodes base64 as leniently as Go's ``base64.StdEncoding``
    does, so a flip of a base64 character's unused bits reads to it as the
    same bytes; pwf refuses those too, since each value has one spelling.
    """
    key = _notes.new_key("example.com/log", _notes.LOG_KEY)
    root = merkle.subtree_root(_lookup, 0, 77)
    note = _notes.sign_note(
        _notes.checkpoint_text(_notes.Checkpoint("example.com/a", 77, root)), key
    )
    original = _notes.parse_checkpoint(_notes.verify_note(note, key.verifier))
    assert (77, root) == (original.size, original.root)
    for bad in _flips(note.encode()):
        try:
            changed = bad.decode()
        except UnicodeDecodeError:
            continue  # not text: no note at all
        with pytest.raises(InputError):
            _notes.parse_checkpoint(_notes.verify_note(changed, key.verifier))
        try:
            theirs = _their_verify(changed, str(key.verifier))
        except (AssertionError, ValueError, InvalidSignature):
            continue
        assert _lenient_same(note, changed), changed
        assert ("example.com/a", "77", root) == theirs


def _lenient_same(note: str, changed: str) -> bool:
    """The two notes differ only in how a base64 value is spelled."""
    ours, theirs = note.split("\n"), changed.split("\n")
    if len(ours) != len(theirs):
        return False
    for mine, other in zip(ours, theirs, strict=True):
        if mine == other:
            continue
        head, _, word = mine.rpartition(" ")
        other_head, _, other_word = other.rpartition(" ")
        if head != other_head or base64.b64decode(word) != base64.b64decode(other_word):
            return False
    return True
