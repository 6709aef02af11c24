"""SQLite and PostgreSQL: persistence, migrations, corrupt rows and encryption at rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import CorruptRecord, EncryptionError, StoreError, Text, ToolResult, tool, user
from tether.stores import Keyring, PostgresStore, SQLiteStore, Store

from .conftest import OpenStore, RawSQL, durable
from .data import conversation

ALICE, BOB = "alice", "bob"
MARKER = "Zq7PlaintextMarker"
K1, K2 = Keyring.generate_key(), Keyring.generate_key()


async def reencrypt(store: Store, batch: int = 500) -> int:
    assert isinstance(store, SQLiteStore | PostgresStore)
    return await store.reencrypt(batch=batch)


@durable
async def test_reopen_keeps_messages_listing_and_ledger(open_store: OpenStore) -> None:
    first = open_store()
    cid = await first.create(ALICE)
    messages = conversation(17)
    await first.append(ALICE, cid, messages)
    await first.record_tool_started(ALICE, cid, "run", "call-9", "deploy", '{"env": "prod"}')
    listing = await first.conversations(ALICE)
    await first.close()
    second = open_store()
    assert (await second.load(ALICE, cid)).messages == tuple(messages)
    assert await second.conversations(ALICE) == listing
    assert [e.call_id for e in await second.pending_tool_effects(ALICE, cid)] == ["call-9"]


@durable
async def test_migrations_are_named_recorded_and_guarded(
    open_store: OpenStore, raw_sql: RawSQL, backend: str
) -> None:
    store = open_store()
    await store.create(ALICE)
    await store.close()
    await open_store().create(ALICE)  # reopening applies nothing twice
    names = [
        ("0001_conversations_messages_ledger",),
        ("0002_replay_guards",),
        ("0003_store_meta",),
        ("0004_compaction_records_search",),
    ]
    if backend == "postgres":  # SQLite's FTS5 table is made when a connection opens
        names += [("0005_search_punctuation_separates_words",), ("0006_deleted_conversations",)]
    else:
        names.append(("0005_deleted_conversations",))
    assert sorted(raw_sql("SELECT name FROM tether_migrations")) == names
    raw_sql("INSERT INTO tether_migrations (name, applied_at) VALUES (?, ?)", "9999_from_the_future", 0.0)
    with pytest.raises(StoreError, match=r"newer than this tether.*9999_from_the_future"):
        await open_store().create(ALICE)


@durable
async def test_corrupt_row_names_conversation_and_seq(open_store: OpenStore, raw_sql: RawSQL) -> None:
    store = open_store()
    bad = await store.create(ALICE, "bad")
    good = await store.create(ALICE, "good")
    messages = conversation(6)
    await store.append(ALICE, bad, messages)
    await store.append(ALICE, good, messages)
    raw_sql(
        "UPDATE tether_messages SET data = ? WHERE seq = 3 AND conversation = "
        "(SELECT pk FROM tether_conversations WHERE id = 'bad')",
        b'{"role": "robot", "parts": []}',
    )
    with pytest.raises(CorruptRecord) as info:
        await store.load(ALICE, bad)
    assert (info.value.conversation_id, info.value.seq) == ("bad", 3)
    assert "conversation bad, seq 3" in str(info.value)
    assert (await store.load(ALICE, good)).messages == tuple(messages)  # the others are unaffected
    assert (await store.load(ALICE, bad, tail=3)).messages == tuple(messages[3:])
    report = await store.load(ALICE, bad, on_corrupt="skip")
    assert report.messages == (*messages[:2], *messages[3:])
    assert [(c.conversation_id, c.seq) for c in report.corrupt] == [("bad", 3)]
    # not JSON at all, and a row that went missing
    raw_sql(
        "UPDATE tether_messages SET data = ? WHERE seq = 5 AND conversation = "
        "(SELECT pk FROM tether_conversations WHERE id = 'bad')",
        b"\xff\x00not json",
    )
    raw_sql(
        "DELETE FROM tether_messages WHERE seq = 1 AND conversation = "
        "(SELECT pk FROM tether_conversations WHERE id = 'bad')"
    )
    report = await store.load(ALICE, bad, on_corrupt="skip")
    assert [c.seq for c in report.corrupt] == [1, 3, 5]
    assert "missing" in str(report.corrupt[0])
    assert report.messages == (messages[1], messages[3], messages[5])


def _stored_bytes(raw_sql: RawSQL, tmp_path: Path, backend: str) -> bytes:
    """Everything an attacker with the files (SQLite) or the tables (PostgreSQL) would see."""
    if backend == "sqlite":
        return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("tether.db*")))
    rows = raw_sql("SELECT data FROM tether_messages")
    rows += raw_sql("SELECT preview FROM tether_conversations WHERE preview IS NOT NULL")
    rows += raw_sql("SELECT arguments FROM tether_tool_effects")
    return b"".join(bytes(r[0]) for r in rows)


@durable
@pytest.mark.parametrize("encrypted", [False, True])
async def test_encrypted_store_holds_no_plaintext(
    open_store: OpenStore, raw_sql: RawSQL, tmp_path: Path, backend: str, encrypted: bool
) -> None:
    keyring = Keyring({"k1": K1}, current="k1") if encrypted else None
    store = open_store(keyring=keyring)
    cid = await store.create(ALICE)
    messages = conversation(12, marker=MARKER)
    await store.append(ALICE, cid, messages)
    await store.record_tool_started(ALICE, cid, "run", "c1", "search", f'{{"q": "{MARKER}"}}')
    fork = await store.fork(ALICE, cid, 5)
    assert (await store.load(ALICE, cid)).messages == tuple(messages)
    assert (await store.load(ALICE, fork)).messages == tuple(messages[:5])
    assert (await store.info(ALICE, cid)).preview is not None
    assert MARKER in (await store.info(ALICE, cid)).preview  # type: ignore[operator]
    assert (await store.pending_tool_effects(ALICE, cid))[0].arguments == f'{{"q": "{MARKER}"}}'
    await store.close()
    stored = _stored_bytes(raw_sql, tmp_path, backend)
    assert (MARKER.encode() in stored) is not encrypted  # the plaintext control proves the check sees it


@durable
async def test_a_row_moved_between_conversations_fails_to_decrypt(
    open_store: OpenStore, raw_sql: RawSQL
) -> None:
    store = open_store(keyring=Keyring({"k1": K1}, current="k1"))
    await store.create(ALICE, "target")
    await store.create(ALICE, "source")
    await store.create(BOB, "target")
    for owner, cid in ((ALICE, "target"), (ALICE, "source"), (BOB, "target")):
        await store.append(owner, cid, [user(f"{owner} {cid} 1"), user(f"{owner} {cid} 2")])

    def copy_row(from_owner: str, from_id: str, from_seq: int, to_seq: int) -> None:
        raw_sql(
            "UPDATE tether_messages SET data = (SELECT m.data FROM tether_messages m "
            "JOIN tether_conversations c ON c.pk = m.conversation "
            "WHERE c.owner = ? AND c.id = ? AND m.seq = ?) "
            "WHERE seq = ? AND conversation = (SELECT pk FROM tether_conversations WHERE owner = 'alice' "
            "AND id = 'target')",
            from_owner,
            from_id,
            from_seq,
            to_seq,
        )

    copy_row(ALICE, "source", 1, 1)  # another conversation of the same owner
    with pytest.raises(EncryptionError, match=r"authentication.*conversation target, seq 1"):
        await store.load(ALICE, "target")
    copy_row(ALICE, "target", 2, 1)  # same conversation, another position
    with pytest.raises(EncryptionError, match=r"conversation target, seq 1"):
        await store.load(ALICE, "target")
    copy_row(BOB, "target", 1, 1)  # same conversation id, another owner
    with pytest.raises(EncryptionError, match=r"conversation target, seq 1"):
        await store.load(ALICE, "target")
    report = await store.load(ALICE, "target", on_corrupt="skip")
    assert [m.text for m in report.messages] == ["alice target 2"]
    assert [(c.conversation_id, c.seq) for c in report.corrupt] == [("target", 1)]
    assert [m.text for m in (await store.load(BOB, "target")).messages] == ["bob target 1", "bob target 2"]


@durable
async def test_rotation_keeps_old_rows_readable(open_store: OpenStore, raw_sql: RawSQL) -> None:
    old = open_store(keyring=Keyring({"k1": K1}, current="k1"))
    cid = await old.create(ALICE)
    messages = conversation(20)
    await old.append(ALICE, cid, messages[:10])
    await old.record_tool_started(ALICE, cid, "run", "c1", "pay", '{"eur": 1}')
    await old.close()

    both = open_store(keyring=Keyring({"k1": K1, "k2": K2}, current="k2"))
    assert (await both.load(ALICE, cid)).messages == tuple(messages[:10])  # old rows still open
    await both.append(ALICE, cid, messages[10:])  # new rows sealed with k2
    assert {r[0] for r in raw_sql("SELECT key_id FROM tether_messages")} == {"k1", "k2"}
    assert await reencrypt(both, batch=7) == 10 + 1 + 1  # 10 messages, the preview, the tool arguments
    assert await reencrypt(both) == 0
    assert {r[0] for r in raw_sql("SELECT key_id FROM tether_messages")} == {"k2"}
    await both.close()

    new = open_store(keyring=Keyring({"k2": K2}, current="k2"))  # k1 retired
    assert (await new.load(ALICE, cid)).messages == tuple(messages)
    assert (await new.info(ALICE, cid)).preview == messages[0].text[:200]
    assert (await new.pending_tool_effects(ALICE, cid))[0].arguments == '{"eur": 1}'
    await new.close()
    with pytest.raises(EncryptionError, match="'k2' is not in the keyring"):
        await open_store(keyring=Keyring({"k1": K1}, current="k1")).load(ALICE, cid)
    with pytest.raises(EncryptionError, match="no keyring"):
        await open_store().load(ALICE, cid)


@durable
async def test_reencrypt_encrypts_rows_written_in_plaintext(open_store: OpenStore, raw_sql: RawSQL) -> None:
    plain = open_store()
    cid = await plain.create(ALICE)
    messages = [user(f"{MARKER} question"), tool(ToolResult("c", "t", (Text(MARKER),)))]
    await plain.append(ALICE, cid, messages)
    await plain.close()
    sealed = open_store(keyring=Keyring({"k1": K1}, current="k1"))
    assert await reencrypt(sealed) == 3  # two messages and the preview
    assert (await sealed.load(ALICE, cid)).messages == tuple(messages)
    contents = raw_sql("SELECT data FROM tether_messages") + raw_sql(
        "SELECT preview FROM tether_conversations"
    )
    assert all(MARKER.encode() not in bytes(r[0]) for r in contents)
    with pytest.raises(EncryptionError, match="keyring"):
        await reencrypt(open_store())
