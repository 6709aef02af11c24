"""Search across an owner's conversations: the values ``Store.search`` returns, the argument
checks every store shares, and the scan used where no index may exist.

``SQLiteStore`` ranks with an FTS5 index and ``PostgresStore`` with full-text search (``tsvector``
and a GIN index); both index the text of plaintext messages only. ``MemoryStore`` scans its
messages with ``tether.history.search_messages``. A store with encryption at rest never writes a
plaintext index: it decrypts and scans the owner's conversations, most recently updated first,
bounded by a number of conversations and of bytes, and says when a bound stopped it
(docs/adr/0010-compaction.md, "Recall and search").
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

from tether.errors import CorruptRecord, EncryptionError, NotFound, UserError
from tether.history import query_terms, render_message, search_messages
from tether.messages import Message, dumps_message
from tether.stores._common import check_count, show
from tether.stores._protocol import ConversationInfo, Loaded, MessageHit, SearchResults

__all__ = [
    "MAX_SEARCH_LIMIT",
    "SNIPPET_CHARS",
    "check_search",
    "index_text",
    "scan_search",
    "scan_store",
    "stored_conversations",
]

MAX_SEARCH_LIMIT = 1_000
MAX_TERMS = 32
MAX_QUERY_CHARS = 1_000
SNIPPET_CHARS = 240
"""About how many characters a hit's snippet shows around its first match."""
INDEX_CHARS = 200_000
"""The most characters of one message the full-text index keeps (the start of the message)."""


class Listed(Protocol):
    """What a scan needs of a store: its listing and loads."""

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]: ...

    async def load(self, owner: str, conversation_id: str) -> Loaded: ...


def check_search(
    query: object, limit: object, max_conversations: object, max_bytes: object
) -> tuple[list[str], int, int, int]:
    """``search``'s arguments: the query's words (at least one, else ``UserError``; split at
    white space and NUL and kept as written, so an index tokenizes them as it tokenized the
    messages; a word is one with a letter or digit), the limit (1 to 1,000) and the scan's bounds
    (at least 1). A query that is not valid Unicode (a lone surrogate, e.g. from undecodable
    command-line bytes) is a ``UserError``: no database can take it."""
    if not isinstance(query, str):
        raise UserError(f"query must be a string, not {show(query)}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"query holds text that is not valid Unicode (a lone surrogate at character {exc.start})"
        ) from None
    head = query[:MAX_QUERY_CHARS].replace("\x00", " ")
    words = list(dict.fromkeys(w for w in head.split() if any(c.isalnum() for c in w)))
    if not words or not query_terms(head):
        raise UserError(f"query {show(query)} has no word to search for")
    terms = words[:MAX_TERMS]
    for name, value in (("limit", limit), ("max_conversations", max_conversations), ("max_bytes", max_bytes)):
        if check_count(value, name) < 1:
            raise UserError(f"{name} must be at least 1, not {show(value)}")
    if limit > MAX_SEARCH_LIMIT:  # type: ignore[operator]  # checked to be an int above
        raise UserError(f"limit must be at most {MAX_SEARCH_LIMIT}, not {show(limit)}")
    return terms, limit, max_conversations, max_bytes  # type: ignore[return-value]


def index_text(message: Message) -> str:
    """The text a full-text index keeps of a message (its transcript line: texts, call names
    and arguments, results; bounded)."""
    return render_message(message, max_part_chars=0)[:INDEX_CHARS]


async def scan_search(
    conversations: AsyncGenerator[tuple[str, Sequence[Message], int]],
    query: str,
    *,
    limit: int,
    max_conversations: int,
    max_bytes: int,
) -> SearchResults:
    """Search conversations one by one, as ``conversations`` yields them (most recently updated
    first): ``(conversation_id, messages, bytes read)``. Stops before a conversation that would
    pass ``max_bytes`` (the first one is always read) or after ``max_conversations``; ranks all
    the messages read together with ``search_messages``."""
    texts: list[Message] = []
    where: list[tuple[str, int]] = []
    read = 0
    seen = 0
    note: str | None = None
    try:
        async for conversation_id, messages, size in conversations:
            if seen >= max_conversations:
                note = (
                    f"stopped after {seen:,} conversations (max_conversations); older ones were not searched"
                )
                break
            if seen and read + size > max_bytes:
                note = (
                    f"stopped after {seen:,} conversations, at {read:,} bytes (max_bytes); "
                    "older ones were not searched"
                )
                break
            seen += 1
            read += size
            for seq, message in enumerate(messages, start=1):
                texts.append(message)
                where.append((conversation_id, seq))
    finally:
        await conversations.aclose()
    hits = search_messages(texts, query, limit=limit, max_chars=SNIPPET_CHARS) if texts else []
    out = tuple(
        MessageHit(where[h.position][0], where[h.position][1], h.role, h.score, h.excerpt) for h in hits
    )
    return SearchResults(out, "scan", seen, complete=note is None, note=note)


async def stored_conversations(
    store: Listed, owner: str, skipped: list[str]
) -> AsyncGenerator[tuple[str, Sequence[Message], int]]:
    """The owner's conversations for ``scan_search``, most recently updated first, each loaded
    (decrypted) whole; its size is the bytes of its messages' JSON. A conversation that does not
    load (a corrupt or undecryptable row) is skipped and its id added to ``skipped``."""
    page = 50
    offset = 0
    while True:
        infos = await store.conversations(owner, limit=page, offset=offset)
        for info in infos:
            try:
                loaded = await store.load(owner, info.conversation_id)
            except NotFound:  # deleted meanwhile
                continue
            except (CorruptRecord, EncryptionError):
                skipped.append(info.conversation_id)
                continue
            size = sum(len(dumps_message(m)) for m in loaded.messages)
            yield info.conversation_id, loaded.messages, size
        if len(infos) < page:
            return
        offset += page


async def scan_store(
    store: Listed, owner: str, query: str, *, limit: int, max_conversations: int, max_bytes: int
) -> SearchResults:
    """``search`` by scanning: decrypt the owner's conversations in memory, most recently updated
    first, within the bounds; nothing read is written anywhere."""
    skipped: list[str] = []
    found = await scan_search(
        stored_conversations(store, owner, skipped),
        query,
        limit=limit,
        max_conversations=max_conversations,
        max_bytes=max_bytes,
    )
    if not skipped:
        return found
    note = f"{len(skipped)} conversation(s) did not load (corrupt or undecryptable rows) and were skipped"
    return SearchResults(
        found.hits,
        found.method,
        found.conversations,
        complete=False,
        note=note if found.note is None else f"{found.note}; {note}",
    )
