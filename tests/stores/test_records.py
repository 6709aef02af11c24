"""Compaction records beside the log (ADR 0010) on every store: append, latest, list, delete,
owner scoping, the boundary rule, delete/purge/fork, and encryption at rest (sealed with kind
``compaction``, strict mode refuses a plaintext row, rotation re-seals them)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tether import CorruptRecord, EncryptionError, NotFound, UserError, assistant, user
from tether.messages import Usage
from tether.stores import CompactionRecord, Keyring, Store, dumps_record

from .conftest import Clock, OpenStore, RawSQL, durable

ALICE, BOB = "alice", "bob"
RING = Keyring({"k1": Keyring.generate_key()}, current="k1")
SECRET = "the migration ticket is OPS-7731"


def _record(cid: str, boundary: int, *, rid: str | None = None, previous: int = 0) -> CompactionRecord:
    return CompactionRecord(
        id=rid or f"r-{boundary}",
        conversation_id=cid,
        boundary=boundary,
        previous_boundary=previous,
        summary=f"summary up to {boundary}: {SECRET}",
        model="scripted",
        usage=Usage(input_tokens=100, output_tokens=20),
        tokens_before=9_000,
        tokens_after=3_000,
        created_at=CompactionRecord.now(),
    )


async def _conversation(store: Store, owner: str = ALICE, cid: str = "chat", n: int = 10) -> str:
    await store.create(owner, cid)
    messages = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(n)]
    await store.append(owner, cid, messages, expected_version=0)
    return cid


async def test_records_are_appended_listed_oldest_first_and_the_latest_is_the_last_appended(
    store: Store,
) -> None:
    cid = await _conversation(store)
    assert await store.latest_record(ALICE, cid) is None
    assert await store.records(ALICE, cid) == []
    first, second = _record(cid, 4), _record(cid, 8, previous=4)
    await store.append_record(ALICE, first)
    await store.append_record(ALICE, second)
    assert await store.latest_record(ALICE, cid) == second
    assert await store.records(ALICE, cid) == [first, second]
    # the log is untouched
    loaded = await store.load(ALICE, cid)
    assert loaded.version == 10
    assert [m.text for m in loaded.messages][:2] == ["q0", "a1"]


async def test_deleting_the_latest_record_restores_the_previous_one_then_none(store: Store) -> None:
    cid = await _conversation(store)
    first, second = _record(cid, 4), _record(cid, 8, previous=4)
    await store.append_record(ALICE, first)
    await store.append_record(ALICE, second)
    await store.delete_record(ALICE, cid, second.id)
    assert await store.latest_record(ALICE, cid) == first
    await store.delete_record(ALICE, cid, first.id)
    assert await store.latest_record(ALICE, cid) is None
    with pytest.raises(NotFound, match="no compaction record 'r-4' in conversation 'chat'"):
        await store.delete_record(ALICE, cid, first.id)


async def test_records_are_owner_scoped_like_conversations(store: Store) -> None:
    cid = await _conversation(store)
    await _conversation(store, BOB, cid)  # the same id, another owner
    await store.append_record(ALICE, _record(cid, 4))
    assert await store.latest_record(BOB, cid) is None
    assert await store.records(BOB, cid) == []
    with pytest.raises(NotFound):
        await store.delete_record(BOB, cid, "r-4")
    assert await store.latest_record(ALICE, cid) is not None
    for call in (
        store.latest_record("mallory", cid),
        store.records("mallory", cid),
        store.append_record("mallory", _record(cid, 2)),
    ):
        with pytest.raises(NotFound, match="no conversation 'chat'"):
            await call


async def test_a_record_cannot_stand_for_messages_not_stored_yet(store: Store) -> None:
    cid = await _conversation(store, n=6)
    with pytest.raises(UserError, match=r"boundary \(seq 7\) passes conversation 'chat', which holds 6"):
        await store.append_record(ALICE, _record(cid, 7))
    await store.append_record(ALICE, _record(cid, 6))
    with pytest.raises(UserError, match="already has a compaction record 'r-6'"):
        await store.append_record(ALICE, _record(cid, 6))
    with pytest.raises(UserError, match="must be a CompactionRecord"):
        await store.append_record(ALICE, dumps_record(_record(cid, 6)))  # type: ignore[arg-type]
    with pytest.raises(UserError, match="record_id"):
        await store.delete_record(ALICE, cid, "")
    assert len(await store.records(ALICE, cid)) == 1


async def test_delete_and_purge_remove_a_conversations_records(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    cid = await _conversation(store)
    await store.append_record(ALICE, _record(cid, 4))
    await store.delete(ALICE, cid)
    await _conversation(store)  # the same id again: a new conversation, no records
    assert await store.records(ALICE, cid) == []
    await store.append_record(ALICE, _record(cid, 6))
    clock.advance(3600)
    assert await store.purge(timedelta(minutes=5)) == 1
    await _conversation(store)
    assert await store.latest_record(ALICE, cid) is None


async def test_fork_copies_the_records_its_messages_cover(store: Store) -> None:
    cid = await _conversation(store)
    for b, prev in ((3, 0), (6, 3), (9, 6)):
        await store.append_record(ALICE, _record(cid, b, previous=prev))
    fork = await store.fork(ALICE, cid, at_version=7, new_id="fork")
    copied = await store.records(ALICE, fork)
    assert [(r.id, r.boundary, r.conversation_id) for r in copied] == [("r-3", 3, "fork"), ("r-6", 6, "fork")]
    assert copied[1].summary == _record(cid, 6).summary
    await store.delete_record(ALICE, fork, "r-6")  # the fork's records are its own
    assert len(await store.records(ALICE, cid)) == 3


# -- encryption at rest ---------------------------------------------------------------------------------
_RECORD_ROW = (
    "WHERE id = ? AND conversation = (SELECT pk FROM tether_conversations WHERE owner = ? AND id = ?)"
)


@durable
async def test_records_are_sealed_with_the_message_key(open_store: OpenStore, raw_sql: RawSQL) -> None:
    store = open_store(keyring=RING)
    cid = await _conversation(store)
    record = _record(cid, 4)
    await store.append_record(ALICE, record)
    key_id, data = raw_sql(f"SELECT key_id, data FROM tether_compactions {_RECORD_ROW}", "r-4", ALICE, cid)[0]
    assert key_id == "k1"
    assert b"OPS-7731" not in bytes(data)
    assert b"summary" not in bytes(data)
    assert await store.latest_record(ALICE, cid) == record
    # moved to another conversation: fails authentication (the associated data names it)
    other = await _conversation(store, cid="other")
    raw_sql(
        "UPDATE tether_compactions SET conversation = (SELECT pk FROM tether_conversations WHERE id = ?) "
        + _RECORD_ROW,
        other,
        "r-4",
        ALICE,
        cid,
    )
    with pytest.raises(EncryptionError, match="failed authentication"):
        await store.latest_record(ALICE, other)


@durable
async def test_a_plaintext_record_inserted_into_an_encrypted_database_is_refused(
    open_store: OpenStore, raw_sql: RawSQL
) -> None:
    store = open_store(keyring=RING)  # a new database with a keyring: recorded sealed, strict
    cid = await _conversation(store)
    forged = dumps_record(_record(cid, 4, rid="forged"))
    raw_sql(
        "INSERT INTO tether_compactions (conversation, id, boundary, key_id, data) "
        "SELECT pk, ?, 4, NULL, ? FROM tether_conversations WHERE owner = ? AND id = ?",
        "forged",
        forged,
        ALICE,
        cid,
    )
    with pytest.raises(
        CorruptRecord, match="compaction record 'forged' of conversation chat is not encrypted"
    ):
        await store.latest_record(ALICE, cid)


@durable
async def test_reencrypt_seals_plaintext_records_and_a_record_row_naming_another_id_is_refused(
    open_store: OpenStore, raw_sql: RawSQL
) -> None:
    plain = open_store()
    cid = await _conversation(plain)
    record = _record(cid, 4)
    await plain.append_record(ALICE, record)
    await plain.close()
    rotating = open_store(keyring=RING, require_encryption=False)
    assert await rotating.reencrypt() >= 1
    key_id, data = raw_sql(f"SELECT key_id, data FROM tether_compactions {_RECORD_ROW}", "r-4", ALICE, cid)[0]
    assert key_id == "k1"
    assert b"OPS-7731" not in bytes(data)
    assert await rotating.latest_record(ALICE, cid) == record
    lenient = open_store(require_encryption=False, keyring=RING)
    raw_sql(
        f"UPDATE tether_compactions SET key_id = NULL, data = ? {_RECORD_ROW}",
        dumps_record(_record(cid, 4, rid="someone-else")),
        "r-4",
        ALICE,
        cid,
    )
    with pytest.raises(CorruptRecord, match="holds record 'someone-else'"):
        await lenient.latest_record(ALICE, cid)
