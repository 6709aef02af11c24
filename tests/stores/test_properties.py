"""Properties of the log: any split into batches, any tail/since, reads back exactly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import UserError
from tether.stores import Keyring, MemoryStore, PostgresStore, SQLiteStore, Store

from .data import conversation

MESSAGES = conversation(40, seed=7)


@st.composite
def splits(draw: st.DrawFn) -> list[int]:
    """Batch sizes (some empty) adding up to at most 40."""
    sizes: list[int] = []
    total = 0
    for size in draw(st.lists(st.integers(0, 9), max_size=10)):
        size = min(size, 40 - total)
        sizes.append(size)
        total += size
    return sizes


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite-encrypted"])
def test_any_batches_read_back_with_any_window(kind: str, tmp_path: Path) -> None:
    keyring = Keyring({"k": Keyring.generate_key()}, current="k") if kind == "sqlite-encrypted" else None
    store: Store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "p.db", keyring=keyring)
    loop = asyncio.new_event_loop()

    @given(sizes=splits(), window=st.integers(0, 45), use_tail=st.booleans())
    def check(sizes: list[int], window: int, use_tail: bool) -> None:
        async def run() -> None:
            cid = await store.create("o")
            version = 0
            for size in sizes:
                batch = MESSAGES[version : version + size]
                version = await store.append("o", cid, batch, expected_version=version)
            expected = MESSAGES[:version]
            assert (await store.load("o", cid)).messages == tuple(expected)
            if use_tail:
                loaded = await store.load("o", cid, tail=window)
                assert loaded.messages == tuple(expected[max(0, version - window) :])
                assert loaded.offset == max(0, version - window)
            elif window > version:
                with pytest.raises(UserError):
                    await store.load("o", cid, since=window)
            else:
                loaded = await store.load("o", cid, since=window)
                assert (loaded.messages, loaded.offset) == (tuple(expected[window:]), window)
            assert (await store.info("o", cid)).message_count == version

        loop.run_until_complete(run())

    try:
        check()
    finally:
        loop.run_until_complete(store.close())
        loop.close()


def test_every_store_satisfies_the_protocol(tmp_path: Path) -> None:
    stores = [
        MemoryStore(),
        SQLiteStore(tmp_path / "x.db"),
        PostgresStore("postgresql://unused@127.0.0.1/none"),
    ]
    assert all(isinstance(s, Store) for s in stores)


def test_keyring_validation() -> None:
    key = Keyring.generate_key()
    assert len(key) == 32
    assert key != Keyring.generate_key()
    with pytest.raises(UserError, match="32 bytes"):
        Keyring({"k": b"short"}, current="k")
    with pytest.raises(UserError, match="current key 'other'"):
        Keyring({"k": key}, current="other")
    with pytest.raises(UserError, match="at least one key"):
        Keyring({}, current="k")
    ring = Keyring({"a": key, "b": Keyring.generate_key()}, current="b")
    assert ring.key_ids == frozenset({"a", "b"})
    key_id, sealed = ring.encrypt(b"secret", b"aad")
    assert key_id == "b"
    assert b"secret" not in sealed
    assert ring.decrypt("b", sealed, b"aad", where="here") == b"secret"
