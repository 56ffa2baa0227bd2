r"""C2SP signed notes, checkpoints and cosignatures with Ed25519; imports merkle and errors.

The byte forms are C2SP's (ADR 0083):

- ``signed-note``: a text ending in a newline, a blank line, then one line
  per signature, ``— NAME BASE64(key id ‖ signature)``; a verifier key is
  ``NAME+HEX(key id)+BASE64(type ‖ public key)`` with the key id
  ``SHA-256(NAME ‖ "\n" ‖ type ‖ public key)[:4]``; a private key file
  holds ``PRIVATE+KEY+NAME+HEX(key id)+BASE64(type ‖ seed)`` (the form of
  Go's ``golang.org/x/mod/sumdb/note``).  Type 0x01 is a log's Ed25519
  key, 0x04 a cosigner's (``tlog-cosignature``).
- ``tlog-checkpoint``: the origin line, the tree size in decimal, the root
  hash in base64, each ending in a newline.
- ``tlog-cosignature`` (v1): the signature is ``timestamp (u64, big-endian)
  ‖ Ed25519`` over ``"cosignature/v1\ntime " TIMESTAMP "\n"`` and the
  checkpoint's text.

Every base64 and decimal is checked to be the one way of writing its value,
so a changed bit of a note is refused, not read as the same value.  The
``cryptography`` package (the ``audit`` extra) is imported only here, when
a key is made, used or checked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pwf import merkle
from pwf.errors import InputError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "COSIGNER",
    "LOG_KEY",
    "Checkpoint",
    "PrivateKey",
    "Verifier",
    "add_cosignature",
    "b64",
    "checkpoint_text",
    "cosignatures",
    "from_b64",
    "new_key",
    "parse_checkpoint",
    "parse_private_key",
    "parse_verifier",
    "sign_note",
    "split_note",
    "verify_note",
]

LOG_KEY: Final = 0x01
"""The signature type of a log's Ed25519 key (C2SP signed-note)."""
COSIGNER: Final = 0x04
"""The signature type of an Ed25519 cosigner (C2SP tlog-cosignature v1)."""
DASH: Final = "\u2014"
_NAME: Final = re.compile(r"[^\s+\u2014]+")
_DECIMAL: Final = re.compile(r"0|[1-9][0-9]{0,19}")


def b64(data: bytes) -> str:
    """Standard base64 with padding."""
    return base64.b64encode(data).decode("ascii")


def from_b64(text: str, what: str) -> bytes:
    """Decode standard base64 that is written the one way its bytes are.

    Raises:
        InputError: not base64, or not in its one form (unused bits set, padding missing).
    """
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise InputError(f"{what} is not base64") from None
    if b64(data) != text:
        raise InputError(f"{what} is not written as its base64")
    return data


def _crypto() -> object:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415
    except ImportError:
        from pwf.extras import missing_extra  # noqa: PLC0415 - only on this error

        what = "signing and checking checkpoints needs the cryptography package"
        raise InputError(missing_extra(what, "audit")) from None
    return ed25519


def key_id(name: str, kind: int, public: bytes) -> bytes:
    r"""``SHA-256(name ‖ "\n" ‖ type ‖ public key)[:4]``."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public).digest()[:4]


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise InputError(f"key name {name!r} must be non-empty, without spaces, '+' or '—'")
    return name


@dataclass(frozen=True)
class Verifier:
    """A verifier key: name, signature type, Ed25519 public key."""

    name: str
    kind: int
    public: bytes

    @property
    def key_id(self) -> bytes:
        """The 4-byte key id."""
        return key_id(self.name, self.kind, self.public)

    def __str__(self) -> str:
        """``NAME+HASH+KEY``."""
        return f"{self.name}+{self.key_id.hex()}+{b64(bytes([self.kind]) + self.public)}"

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True when ``signature`` is this key's Ed25519 signature of ``message``."""
        ed25519 = _crypto()
        public: Ed25519PublicKey = ed25519.Ed25519PublicKey.from_public_bytes(self.public)  # type: ignore[attr-defined]
        try:
            public.verify(signature, message)
        except Exception:  # noqa: BLE001 - cryptography's InvalidSignature, whatever its import
            return False
        return True


@dataclass(frozen=True)
class PrivateKey:
    """A private key: name, signature type, Ed25519 seed."""

    name: str
    kind: int
    seed: bytes

    def _key(self) -> Ed25519PrivateKey:
        ed25519 = _crypto()
        return ed25519.Ed25519PrivateKey.from_private_bytes(self.seed)  # type: ignore[attr-defined,no-any-return]

    @property
    def verifier(self) -> Verifier:
        """The verifier key that checks this key's signatures."""
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        public = (
            self._key()
            .public_key()
            .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        )
        return Verifier(self.name, self.kind, public)

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of ``message``."""
        return self._key().sign(message)

    def __str__(self) -> str:
        """``PRIVATE+KEY+NAME+HASH+KEY``."""
        keyid = self.verifier.key_id.hex()
        return f"PRIVATE+KEY+{self.name}+{keyid}+{b64(bytes([self.kind]) + self.seed)}"


def new_key(name: str, kind: int) -> PrivateKey:
    """A new Ed25519 key named ``name`` of signature type ``kind``."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    ed25519 = _crypto()
    key: Ed25519PrivateKey = ed25519.Ed25519PrivateKey.generate()  # type: ignore[attr-defined]
    seed = key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    return PrivateKey(_check_name(name), kind, seed)


def _parts(text: str, what: str, count: int) -> list[str]:
    parts = text.strip().split("+", count - 1)  # the key's base64 may hold a '+' itself
    if len(parts) != count:
        raise InputError(
            f"{what} is not of the form {'PRIVATE+KEY+' if count == 5 else ''}NAME+HASH+KEY"
        )
    return parts


def parse_verifier(text: str, kinds: tuple[int, ...] = (LOG_KEY, COSIGNER)) -> Verifier:
    """Read ``NAME+HASH+KEY``, checking the hash and the type.

    Raises:
        InputError: not a verifier key of one of ``kinds``, or its hash does not match.
    """
    name, keyid, key = _parts(text, "the verifier key", 3)
    data = from_b64(key, "the verifier key")
    if len(data) != 33 or data[0] not in kinds:
        raise InputError("the verifier key is not an Ed25519 key of the expected type")
    verifier = Verifier(_check_name(name), data[0], data[1:])
    if verifier.key_id.hex() != keyid:
        raise InputError("the verifier key's hash does not match its name and key")
    return verifier


def parse_private_key(text: str, kinds: tuple[int, ...] = (LOG_KEY, COSIGNER)) -> PrivateKey:
    """Read a private key file's ``PRIVATE+KEY+NAME+HASH+KEY``.

    Raises:
        InputError: not a private key of one of ``kinds``.
    """
    private, key_word, name, keyid, key = _parts(text, "the key file", 5)
    data = from_b64(key, "the key file")
    if (private, key_word) != ("PRIVATE", "KEY") or len(data) != 33 or data[0] not in kinds:
        raise InputError("the key file does not hold an Ed25519 private key of the expected type")
    found = PrivateKey(_check_name(name), data[0], data[1:])
    if found.verifier.key_id.hex() != keyid:
        raise InputError("the key file's hash does not match its name and key")
    return found


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's three lines."""

    origin: str
    size: int
    root: bytes


def checkpoint_text(checkpoint: Checkpoint) -> str:
    """The tlog-checkpoint note text (each line ending in a newline)."""
    return f"{checkpoint.origin}\n{checkpoint.size}\n{b64(checkpoint.root)}\n"


def parse_checkpoint(text: str) -> Checkpoint:
    """Read a checkpoint's note text (no extension lines).

    Raises:
        InputError: not three lines of origin, decimal size and base64 root.
    """
    lines = text.split("\n")
    if len(lines) != 4 or lines[3] != "" or not lines[0] or lines[0] != lines[0].strip():
        raise InputError("the checkpoint is not an origin, a size and a root hash, one a line")
    if not _DECIMAL.fullmatch(lines[1]):
        raise InputError("the checkpoint's tree size is not a decimal")
    root = from_b64(lines[2], "the checkpoint's root hash")
    if len(root) != merkle.HASH_SIZE:
        raise InputError("the checkpoint's root hash is not 32 bytes")
    return Checkpoint(lines[0], int(lines[1]), root)


def split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The note's text and its signatures (name, key id ‖ signature).

    Raises:
        InputError: no blank line before the signatures, or a malformed signature line.
    """
    at = note.rfind("\n\n")
    if at < 0 or not note.endswith("\n"):
        raise InputError("the note has no signatures after a blank line")
    text, lines = note[: at + 1], note[at + 2 :].split("\n")[:-1]
    if not lines:
        raise InputError("the note has no signatures after a blank line")
    signatures: list[tuple[str, bytes]] = []
    for line in lines:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != DASH or not _NAME.fullmatch(parts[1]):
            raise InputError(f"the note's line {line!r} is not a signature")
        signature = from_b64(parts[2], "a note signature")
        if len(signature) < 5:
            raise InputError("a note signature is too short")
        signatures.append((parts[1], signature))
    return text, signatures


def sign_note(text: str, key: PrivateKey) -> str:
    """``text`` signed by ``key``: the text, a blank line, the signature line."""
    signature = key.verifier.key_id + key.sign(text.encode())
    return f"{text}\n{DASH} {key.name} {b64(signature)}\n"


def verify_note(note: str, verifier: Verifier) -> str:
    """The note's text, once a signature of ``verifier`` over it is found valid.

    Raises:
        InputError: the note has no valid signature of ``verifier``.
    """
    text, signatures = split_note(note)
    for name, signature in signatures:
        if name == verifier.name and signature[:4] == verifier.key_id:
            if verifier.verify(signature[4:], text.encode()):
                return text
            raise InputError(f"the signature of {verifier.name} does not verify")
    raise InputError(f"the note has no signature of {verifier.name}")


def _cosigned(text: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def add_cosignature(note: str, key: PrivateKey, timestamp: int) -> str:
    """``note`` with the cosignature (tlog-cosignature v1) of ``key`` at ``timestamp`` added."""
    text, _ = split_note(note)
    signature = key.sign(_cosigned(text, timestamp))
    line = (
        f"{DASH} {key.name} {b64(key.verifier.key_id + timestamp.to_bytes(8, 'big') + signature)}\n"
    )
    return note + line


def cosignatures(note: str, witnesses: list[Verifier]) -> list[tuple[Verifier, int]]:
    """The witnesses whose cosignature of the note verifies, with its timestamp."""
    text, signatures = split_note(note)
    found: list[tuple[Verifier, int]] = []
    for witness in witnesses:
        for name, signature in signatures:
            if name != witness.name or signature[:4] != witness.key_id or len(signature) != 76:
                continue
            timestamp = int.from_bytes(signature[4:12], "big")
            if timestamp < 2**63 and witness.verify(signature[12:], _cosigned(text, timestamp)):
                found.append((witness, timestamp))
                break
    return found
