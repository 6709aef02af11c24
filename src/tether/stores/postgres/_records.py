"""PostgreSQL queries of compaction records and of the full-text index (inside a transaction the
store opened).

The index is the table ``tether_search (conversation, seq, role, body, tsv)``: ``tsv`` is
``to_tsvector('simple', tether_search_words(body))`` under a GIN index: the body with every run
of punctuation, symbols and white space turned into one space (migration
``0005_search_punctuation_separates_words``; SQLite's ``unicode61`` cuts text the same way),
then no stemming. A query term is a phrase of its words cut the same way. It holds the
transcript text of plaintext messages only and is never written by a store with a keyring. It
catches up on search (the conversation row's ``indexed`` column), so an append costs nothing
more; ``ON DELETE CASCADE`` removes a conversation's rows with it. Snippets are cut from the
body around the first place a term (else one of its words) appears.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import psycopg
from psycopg import sql

from tether.messages import Message
from tether.stores._protocol import MessageHit
from tether.stores._records import CompactionRecord, boundary_error, duplicate_record, record_not_found
from tether.stores._rows import RowCodec
from tether.stores._search import SNIPPET_CHARS, index_text

__all__ = [
    "append_record",
    "copy_records",
    "delete_record",
    "drop_index",
    "fts_search",
    "latest_record",
    "records",
    "reseal_records",
]

_Conn = psycopg.AsyncConnection[tuple[Any, ...]]
_message_decoder = msgspec.json.Decoder(Message)
_COLUMNS = "id, key_id, data"
_SPACE = re.compile(r"\s+")
_INSERT = (
    "INSERT INTO tether_compactions (conversation, id, boundary, key_id, data) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (conversation, id) DO NOTHING"
)


async def append_record(
    conn: _Conn, codec: RowCodec, owner: str, record: CompactionRecord, pk: int, version: int
) -> None:
    if record.boundary > version:
        raise boundary_error(record, version)
    key_id, data = codec.seal_record(owner, record)
    cursor = await conn.execute(_INSERT, (pk, record.id, record.boundary, key_id, data))
    if cursor.rowcount != 1:
        raise duplicate_record(record)


async def _open(codec: RowCodec, owner: str, cid: str, cursor: Any) -> list[CompactionRecord]:
    return [codec.open_record(owner, cid, rid, key_id, data) for rid, key_id, data in await cursor.fetchall()]


async def latest_record(
    conn: _Conn, codec: RowCodec, owner: str, cid: str, pk: int
) -> CompactionRecord | None:
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM tether_compactions WHERE conversation = %s ORDER BY pk DESC LIMIT 1",
        (pk,),
        binary=True,
    )
    found = await _open(codec, owner, cid, cursor)
    return found[0] if found else None


async def records(conn: _Conn, codec: RowCodec, owner: str, cid: str, pk: int) -> list[CompactionRecord]:
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM tether_compactions WHERE conversation = %s ORDER BY pk", (pk,), binary=True
    )
    return await _open(codec, owner, cid, cursor)


async def delete_record(conn: _Conn, cid: str, pk: int, record_id: str) -> None:
    cursor = await conn.execute(
        "DELETE FROM tether_compactions WHERE conversation = %s AND id = %s", (pk, record_id)
    )
    if cursor.rowcount != 1:
        raise record_not_found(cid, record_id)


async def copy_records(
    conn: _Conn, codec: RowCodec, owner: str, source: tuple[str, int], target: tuple[str, int], at: int
) -> None:
    """Copy the records of ``source`` (id, pk) whose boundary is at most ``at`` to its fork."""
    (source_id, source_pk), (target_id, target_pk) = source, target
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM tether_compactions WHERE conversation = %s AND boundary <= %s ORDER BY pk",
        (source_pk, at),
        binary=True,
    )
    for rid, key_id, data in await cursor.fetchall():
        record, new_key, sealed = codec.copy_record(owner, source_id, target_id, rid, key_id, data)
        await conn.execute(_INSERT, (target_pk, record.id, record.boundary, new_key, sealed))


async def reseal_records(conn: _Conn, codec: RowCodec, current: str, batch: int) -> int:
    """Re-seal up to ``batch`` record rows not sealed with ``current``; how many were rewritten."""
    cursor = await conn.execute(
        "SELECT r.pk, c.owner, c.id, r.id, r.key_id, r.data FROM tether_compactions r "
        "JOIN tether_conversations c ON c.pk = r.conversation "
        "WHERE r.key_id IS DISTINCT FROM %s LIMIT %s FOR UPDATE OF r",
        (current, batch),
    )
    rows = await cursor.fetchall()
    for pk, o, cid, rid, key_id, data in rows:
        await conn.execute(
            "UPDATE tether_compactions SET key_id = %s, data = %s WHERE pk = %s",
            (*codec.reseal_record(o, cid, rid, key_id, data), pk),
        )
    return len(rows)


async def drop_index(conn: _Conn) -> None:
    """Empty the index (the database is being sealed: its plaintext must go)."""
    await conn.execute("DELETE FROM tether_search")
    await conn.execute("UPDATE tether_conversations SET indexed = 0 WHERE indexed != 0")


async def _catch_up(conn: _Conn, owner: str) -> None:
    """Index the owner's plaintext messages the index does not hold yet (the conversation rows
    are locked meanwhile, so two searches never index the same rows)."""
    cursor = await conn.execute(
        "SELECT pk, version, indexed FROM tether_conversations WHERE owner = %s AND indexed < version "
        "ORDER BY pk FOR UPDATE",
        (owner,),
    )
    decode = _message_decoder.decode
    for pk, version, indexed in await cursor.fetchall():
        rows = await conn.execute(
            "SELECT seq, data FROM tether_messages WHERE conversation = %s AND seq > %s AND seq <= %s "
            "AND key_id IS NULL ORDER BY seq",
            (pk, indexed, version),
            binary=True,
        )
        entries: list[tuple[int, int, str, str]] = []
        for seq, data in await rows.fetchall():
            try:
                message = decode(data)
            except (msgspec.DecodeError, RecursionError, TypeError, ValueError):
                continue  # a corrupt row is not searchable; load names it
            body = index_text(message).replace("\x00", "\ufffd")  # text cannot hold NUL
            entries.append((pk, seq, message.role, body))
        if entries:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO tether_search (conversation, seq, role, body) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (conversation, seq) DO NOTHING",
                    entries,
                )
        await conn.execute("UPDATE tether_conversations SET indexed = %s WHERE pk = %s", (version, pk))


async def fts_search(conn: _Conn, owner: str, terms: list[str], limit: int) -> tuple[list[MessageHit], int]:
    """Catch the owner's index up, then the best ``limit`` hits (``ts_rank_cd``) with snippets
    and how many conversations the owner has (all searched). Any term matches; each term is a
    phrase of its words as the index cut them (``phraseto_tsquery`` of ``tether_search_words``),
    so ``deploy.toml`` and ``DEP-4471`` match as written and ``deploy`` matches inside a path."""
    await _catch_up(conn, owner)
    query = sql.SQL(" || ").join(
        [sql.SQL("phraseto_tsquery('simple', tether_search_words(%s))")] * len(terms)
    )
    statement = sql.SQL(
        "WITH q AS (SELECT {query} AS query), "
        "best AS (SELECT c.id AS cid, s.conversation AS conv, s.seq, s.role, s.body, "
        "ts_rank_cd(s.tsv, q.query) AS score "
        "FROM tether_search s JOIN tether_conversations c ON c.pk = s.conversation, q "
        "WHERE c.owner = %s AND s.tsv @@ q.query "
        "ORDER BY score DESC, s.conversation DESC, s.seq DESC LIMIT %s), "
        # where a snippet starts: the first place a term appears as written, else one of its words
        "needles AS (SELECT 0 AS rank, lower(t) AS w FROM unnest(%s::text[]) t "
        "UNION SELECT 1, w FROM unnest(%s::text[]) t, "
        "regexp_split_to_table(lower(tether_search_words(t)), ' ') w WHERE w <> '') "
        "SELECT cid, seq, role, score, at, substr(body, at, %s), char_length(body) FROM ("
        "SELECT b.*, greatest(1, coalesce((SELECT p FROM needles n, strpos(low.body, n.w) p "
        "WHERE p > 0 ORDER BY n.rank, p LIMIT 1), 1) - %s) AS at "
        "FROM best b, LATERAL (SELECT lower(b.body) AS body) low) h "
        "ORDER BY score DESC, conv DESC, seq DESC"
    ).format(query=query)
    params = (*terms, owner, limit, terms, terms, _WINDOW, _LEAD)
    cursor = await conn.execute(statement, params)
    hits = [
        MessageHit(str(cid), int(seq), str(role), float(score), _snippet(str(window), int(at), int(length)))
        for cid, seq, role, score, at, window, length in await cursor.fetchall()
    ]
    cursor = await conn.execute("SELECT count(*) FROM tether_conversations WHERE owner = %s", (owner,))
    row = await cursor.fetchone()
    return hits, int(row[0]) if row is not None else 0


_LEAD = SNIPPET_CHARS // 3
"""How many characters a snippet shows before its match (about)."""
_SLACK = 40
"""How far from either end of a snippet a cut word may reach."""
_WINDOW = SNIPPET_CHARS + _SLACK
"""How many characters of the message are read for a snippet (its words are cut whole)."""


def _snippet(window: str, at: int, length: int) -> str:
    """A snippet from ``window``, the characters of a ``length``-character message from ``at``
    (1-based): at most ``SNIPPET_CHARS`` of them, a word cut at either end dropped, ``…`` where
    text was left out."""
    text = window
    if at > 1:
        first = _SPACE.search(text, 0, _SLACK)
        text = text[first.end() :] if first else text
    cut = at - 1 + len(window) < length or len(text) > SNIPPET_CHARS
    if cut:
        text = text[:SNIPPET_CHARS]
        last = max((m.start() for m in _SPACE.finditer(text, SNIPPET_CHARS - _SLACK)), default=-1)
        text = text[:last] if last > 0 else text
    return ("…" if at > 1 else "") + text.strip() + ("…" if cut else "")
