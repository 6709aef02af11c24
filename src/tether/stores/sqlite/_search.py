"""``SQLiteStore``'s compaction records and search (the queries: ``_records``)."""

from __future__ import annotations

import sqlite3
from typing import cast

from tether.stores._common import check_id, check_ids
from tether.stores._protocol import SCAN_BYTES, SCAN_CONVERSATIONS, SearchResults
from tether.stores._records import CompactionRecord, check_record
from tether.stores._search import Listed, check_search, scan_store
from tether.stores.sqlite import _records as recs
from tether.stores.sqlite._base import SQLiteBase

__all__ = ["SQLiteSearch"]


class SQLiteSearch(SQLiteBase):
    """Records and search of ``SQLiteStore`` (see ``Store``)."""

    async def append_record(self, owner: str, record: CompactionRecord) -> None:
        """See ``Store.append_record``. Sealed like messages when the store has a keyring."""
        owner = check_id(owner, "owner")
        record = check_record(record)
        codec = self._codec

        def tx(conn: sqlite3.Connection) -> None:
            codec.check_writable()
            row = self._row(conn, owner, record.conversation_id)
            recs.append_record(conn, codec, owner, record, row[0], row[2])

        await self._db.write(tx)

    async def latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        """See ``Store.latest_record``."""
        owner, conversation_id = check_ids(owner, conversation_id)

        def read(conn: sqlite3.Connection) -> CompactionRecord | None:
            pk = self._row(conn, owner, conversation_id)[0]
            return recs.latest_record(conn, self._codec, owner, conversation_id, pk)

        return await self._db.read(read)

    async def records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        """See ``Store.records``."""
        owner, conversation_id = check_ids(owner, conversation_id)

        def read(conn: sqlite3.Connection) -> list[CompactionRecord]:
            pk = self._row(conn, owner, conversation_id)[0]
            return recs.records(conn, self._codec, owner, conversation_id, pk)

        return await self._db.read(read)

    async def delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        """See ``Store.delete_record``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        record_id = check_id(record_id, "record_id")

        def tx(conn: sqlite3.Connection) -> None:
            recs.delete_record(conn, conversation_id, self._row(conn, owner, conversation_id)[0], record_id)

        await self._db.write(tx)

    async def search(
        self,
        owner: str,
        query: str,
        *,
        limit: int = 20,
        max_conversations: int = SCAN_CONVERSATIONS,
        max_bytes: int = SCAN_BYTES,
    ) -> SearchResults:
        """See ``Store.search``: FTS5 (BM25, snippets) over the owner's plaintext messages, the
        index catching up first. With a keyring no index is written: the owner's conversations
        are decrypted and scanned, bounded (``max_conversations``, ``max_bytes``). A SQLite built
        without FTS5 scans too, and the result says so."""
        owner = check_id(owner, "owner")
        terms, limit, max_conversations, max_bytes = check_search(query, limit, max_conversations, max_bytes)
        await self._db.open()  # connected: the FTS5 and keyring facts are known
        if self._codec.keyring is None and self._fts:
            hits, count = await self._db.write(lambda conn: recs.fts_search(conn, owner, terms, limit))
            return SearchResults(tuple(hits), "fts5", count)
        listed = cast(Listed, self)  # a SQLiteStore, which lists and loads
        found = await scan_store(
            listed, owner, query, limit=limit, max_conversations=max_conversations, max_bytes=max_bytes
        )
        if self._codec.keyring is None:  # no FTS5 in this SQLite
            note = "this SQLite has no FTS5: the messages were scanned"
            return SearchResults(
                found.hits,
                "scan",
                found.conversations,
                found.complete,
                f"{found.note}; {note}" if found.note else note,
            )
        return found
