"""Encryption at rest: AES-256-GCM with a key id per row.

A ``Keyring`` holds every key that may still seal rows in the database and names the ``current``
one new rows are sealed with. Rotation: build a keyring holding the old and the new key with the
new one current, call ``await store.reencrypt()`` (rewrites every row sealed with another key or
stored in plaintext; the messages' JSON is unchanged), then the old key can be retired.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tether.errors import EncryptionError, MissingExtra, UserError
from tether.stores._common import check_id

try:
    from cryptography.exceptions import InvalidTag as _invalid_tag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _aesgcm
except ImportError:  # pragma: no cover - exercised only without the extra
    _aesgcm = None
    _invalid_tag = ValueError

__all__ = ["Keyring", "stored_bytes"]

_NONCE = 12
_TAG = 16


class Keyring:
    """Named 256-bit AES-GCM keys; ``current`` seals new rows, every key can open old ones.

    >>> ring = Keyring({"k1": Keyring.generate_key()}, current="k1")
    """

    __slots__ = ("_ciphers", "current")

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if _aesgcm is None:
            raise MissingExtra("encryption at rest", "crypto", "cryptography")
        if not keys:
            raise UserError("a Keyring needs at least one key")
        ciphers: dict[str, Any] = {}
        for key_id, key in keys.items():
            if not isinstance(key_id, str) or not key_id or len(key_id) > 64:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise UserError(f"key id must be a non-empty string of at most 64 characters, not {key_id!r}")
            check_id(key_id, "key id")  # stored next to each row: text every database can hold
            if not isinstance(key, bytes) or len(key) != 32:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise UserError(f"key {key_id!r} must be 32 bytes (AES-256)")
            ciphers[key_id] = _aesgcm(key)
        if current not in ciphers:
            raise UserError(f"current key {current!r} is not in the keyring ({', '.join(sorted(ciphers))})")
        self._ciphers = ciphers
        self.current = current

    @staticmethod
    def generate_key() -> bytes:
        """A fresh random 32-byte key."""
        return os.urandom(32)

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._ciphers)

    def encrypt(self, plaintext: bytes, aad: bytes) -> tuple[str, bytes]:
        """Seal with the current key: returns ``(key_id, nonce + ciphertext + tag)``."""
        nonce = os.urandom(_NONCE)
        return self.current, nonce + self._ciphers[self.current].encrypt(nonce, plaintext, aad)

    def decrypt(self, key_id: object, sealed: object, aad: bytes, *, where: str) -> bytes:
        """Open a sealed value; ``EncryptionError`` naming ``where`` if the key is missing or the
        value fails authentication (tampered, cut short, or moved from another conversation or
        position)."""
        cipher = self._ciphers.get(key_id) if isinstance(key_id, str) else None
        if cipher is None:
            raise EncryptionError(f"key {key_id!r} is not in the keyring ({where})")
        value = stored_bytes(sealed)
        if value is None:
            raise EncryptionError(
                f"row failed authentication: the sealed value is stored as {type(sealed).__name__}, "
                f"not bytes ({where})"
            )
        if len(value) < _NONCE + _TAG:
            raise EncryptionError(
                f"row failed authentication: the sealed value is {len(value)} bytes, shorter than "
                f"a nonce and a tag ({where})"
            )
        try:
            return cipher.decrypt(value[:_NONCE], value[_NONCE:], aad)
        except (_invalid_tag, ValueError, OverflowError):
            raise EncryptionError(
                "row failed authentication: tampered, or moved from another conversation "
                f"or position ({where})"
            ) from None


def stored_bytes(value: object) -> bytes | None:
    """A binary column value as ``bytes``; ``None`` when the database handed back anything else
    (SQLite keeps whatever type was written into a column)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, memoryview):
        return value.tobytes()
    return None
