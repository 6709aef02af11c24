"""``Store.search`` on every store: ranked hits with snippets across an owner's conversations
(SQLite FTS5, PostgreSQL full-text search, a scan in memory), owner scoping, the index kept in
step with append, delete, purge and fork, and encryption at rest: no plaintext index is written,
search decrypts and scans within its bounds and says when a bound stopped it."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from tether import Text, ToolCall, ToolResult, UserError, assistant, tool, user
from tether.stores import Keyring, PostgresStore, SearchResults, Store

from .conftest import Clock, OpenStore, RawSQL, durable

ALICE, BOB = "alice", "bob"
RING = Keyring({"k1": Keyring.generate_key()}, current="k1")
FILLER = "the worker pool restarts nightly and the cache is warmed from the replica. "
METHOD = {"memory": "scan", "sqlite": "fts5", "postgres": "postgres"}


async def _fill(store: Store, owner: str = ALICE) -> None:
    """Three conversations: the deploy one mentions DEP-4471 three times, the config one once."""
    await store.create(owner, "deploy")
    call = ToolCall("c1", "read_file", '{"path": "/srv/app/deploy.toml"}')
    await store.append(
        owner,
        "deploy",
        [
            user("Why did the deploy DEP-4471 fail? " + FILLER),
            assistant(call),
            tool(
                ToolResult(
                    "c1", "read_file", (Text("error E-1042: DEP-4471 rollout blocked by DEP-4471 gate"),)
                )
            ),
            assistant("DEP-4471 failed because the gate was closed. " + FILLER),
        ],
        expected_version=0,
    )
    await store.create(owner, "config")
    await store.append(
        owner,
        "config",
        [
            user("Where do the settings live? " + FILLER),
            assistant("In /srv/app/settings.toml; see DEP-4471."),
        ],
        expected_version=0,
    )
    await store.create(owner, "lunch")
    await store.append(owner, "lunch", [user("What is for lunch?"), assistant("Soup.")], expected_version=0)


def _where(found: SearchResults) -> list[tuple[str, int]]:
    return [(h.conversation_id, h.seq) for h in found.hits]


async def test_search_ranks_matches_across_conversations_with_snippets(store: Store, backend: str) -> None:
    await _fill(store)
    found = await store.search(ALICE, "DEP-4471")
    assert found.method == METHOD[backend]
    assert found.complete
    assert found.conversations == 3
    where = _where(found)
    assert set(where) == {("deploy", 1), ("deploy", 3), ("deploy", 4), ("config", 2)}
    assert where[0] == ("deploy", 3)  # three mentions in a short text: the best match
    top = found.hits[0]
    assert top.role == "tool"
    assert "DEP-4471" in top.snippet
    assert len(top.snippet) < 400
    assert all(h.score > 0 for h in found.hits)
    assert [h.score for h in found.hits] == sorted((h.score for h in found.hits), reverse=True)
    assert _where(await store.search(ALICE, "DEP-4471", limit=1)) == [("deploy", 3)]


async def test_identifiers_and_paths_match_as_written(store: Store) -> None:
    await _fill(store)
    assert _where(await store.search(ALICE, "/srv/app/settings.toml")) == [("config", 2)]
    assert ("deploy", 2) in _where(await store.search(ALICE, "read_file"))  # a call's name is searchable
    assert _where(await store.search(ALICE, "E-1042")) == [("deploy", 3)]
    assert (await store.search(ALICE, "kubernetes")).hits == ()
    lunch = await store.search(ALICE, "LUNCH")  # case does not matter
    assert _where(lunch) == [("lunch", 1)]


async def test_search_is_owner_scoped(store: Store) -> None:
    await _fill(store)
    await store.create(BOB, "deploy")  # the same id, another owner
    await store.append(BOB, "deploy", [user("bob's own DEP-4471 notes")], expected_version=0)
    bobs = await store.search(BOB, "DEP-4471")
    assert _where(bobs) == [("deploy", 1)]
    assert "bob's own" in bobs.hits[0].snippet
    assert bobs.conversations == 1
    assert all("bob" not in h.snippet for h in (await store.search(ALICE, "DEP-4471")).hits)
    assert (await store.search("mallory", "DEP-4471")).hits == ()


async def test_the_index_follows_appends_deletes_purges_and_forks(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    await _fill(store)
    assert _where(await store.search(ALICE, "soup")) == [("lunch", 2)]
    await store.append(ALICE, "lunch", [user("And dessert? Tiramisu please.")])
    assert _where(await store.search(ALICE, "tiramisu")) == [("lunch", 3)]
    fork = await store.fork(ALICE, "lunch", at_version=2, new_id="lunch-2")
    assert set(_where(await store.search(ALICE, "soup"))) == {("lunch", 2), (fork, 2)}
    assert _where(await store.search(ALICE, "tiramisu")) == [("lunch", 3)]  # past the fork point
    await store.delete(ALICE, "lunch")
    assert _where(await store.search(ALICE, "soup")) == [(fork, 2)]
    # a new conversation reusing the deleted one's id sees none of the old text
    await store.create(ALICE, "lunch")
    await store.append(ALICE, "lunch", [user("hello")])
    assert _where(await store.search(ALICE, "tiramisu")) == []
    clock.advance(3600)
    await store.append(ALICE, "config", [user("still here")])
    assert await store.purge(timedelta(minutes=5)) == 3
    assert _where(await store.search(ALICE, "soup")) == []
    assert {h.conversation_id for h in (await store.search(ALICE, "DEP-4471")).hits} == {"config"}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"query": "  ...  "}, "has no word"),
        ({"query": 42}, "query must be a string"),
        ({"query": "x", "limit": 0}, "limit must be at least 1"),
        ({"query": "x", "limit": 5_000}, "limit must be at most 1000"),
        ({"query": "x", "limit": True}, "limit must be an int"),
        ({"query": "x", "max_conversations": 0}, "max_conversations must be at least 1"),
        ({"query": "x", "max_bytes": -1}, "max_bytes must be an int"),
    ],
)
async def test_bad_search_arguments_are_named(store: Store, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        await store.search(ALICE, **kwargs)  # type: ignore[arg-type]


HOSTILE = [
    'a"b',
    '"unterminated',
    "NEAR(",
    "NEAR(deploy gate, 2)",
    "deploy*",
    "-deploy",
    "deploy OR",
    "OR AND NOT",
    "(deploy",
    "role:user",
    "body:deploy",
    "deploy & gate | !x <-> y:*",
    "'); DROP TABLE tether_messages; --",
    "deploy\x00gate",
    "deploy\x01\x1b\x7f",
    "x" * 100_000,
    "DEP-4471 " * 20_000,
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_queries_search_as_words_and_never_reach_the_database_as_syntax(
    store: Store, query: str
) -> None:
    """FTS5 and tsquery syntax, NUL and control characters, huge queries: each word is searched
    as written; nothing is parsed as query syntax and nothing fails in the database."""
    await _fill(store)
    found = await store.search(ALICE, query)
    assert all(h.conversation_id in ("deploy", "config", "lunch") for h in found.hits)
    assert all(h.score > 0 for h in found.hits)


async def test_nul_separates_words(store: Store) -> None:
    await _fill(store)
    assert ("deploy", 1) in _where(await store.search(ALICE, "DEP-4471\x00Why"))


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("_", "has no word"),
        ('" * - ( )', "has no word"),
        ("__ %_ ...", "has no word"),
        ("\x00", "has no word"),
        ("deploy\ud800", "not valid Unicode"),
        ("\udcff", "not valid Unicode"),
    ],
)
async def test_queries_without_a_word_or_with_lone_surrogates_are_user_errors(
    store: Store, query: str, match: str
) -> None:
    """A word is what holds a letter or digit (``_`` alone is not one anywhere); a lone surrogate
    (undecodable command-line bytes) cannot reach a database."""
    await _fill(store)
    with pytest.raises(UserError, match=match):
        await store.search(ALICE, query)


# -- the index on disk -------------------------------------------------------------------------------------
@durable
async def test_a_database_indexed_before_search_existed_is_indexed_by_its_first_search(
    open_store: OpenStore, raw_sql: RawSQL
) -> None:
    store = open_store()
    await _fill(store)
    await store.close()
    # what a database migrated from an earlier release looks like: messages, nothing indexed
    raw_sql("DELETE FROM tether_search")
    raw_sql("UPDATE tether_conversations SET indexed = 0")
    again = open_store()
    assert len((await again.search(ALICE, "DEP-4471")).hits) == 4
    assert {r[0] for r in raw_sql("SELECT indexed FROM tether_conversations")} == {4, 2}


@durable
async def test_with_encryption_no_plaintext_index_is_written_and_search_scans(
    open_store: OpenStore, raw_sql: RawSQL
) -> None:
    store = open_store(keyring=RING)
    await _fill(store)
    found = await store.search(ALICE, "DEP-4471")
    assert found.method == "scan"
    assert found.complete
    assert set(_where(found)) == {("deploy", 1), ("deploy", 3), ("deploy", 4), ("config", 2)}
    assert "DEP-4471" in found.hits[0].snippet
    assert raw_sql("SELECT count(*) FROM tether_search")[0][0] == 0
    assert {r[0] for r in raw_sql("SELECT indexed FROM tether_conversations")} == {0}


@durable
async def test_sealing_a_database_empties_its_plaintext_index(open_store: OpenStore, raw_sql: RawSQL) -> None:
    plain = open_store()
    await _fill(plain)
    assert len((await plain.search(ALICE, "DEP-4471")).hits) == 4
    assert raw_sql("SELECT count(*) FROM tether_search")[0][0] > 0
    await plain.close()
    sealing = open_store(keyring=RING, require_encryption=False)
    await sealing.reencrypt()
    assert raw_sql("SELECT count(*) FROM tether_search")[0][0] == 0
    assert len((await sealing.search(ALICE, "DEP-4471")).hits) == 4  # now by a scan


async def test_a_scan_stops_at_its_bounds_and_says_so(open_store: OpenStore, backend: str) -> None:
    clock = Clock()
    store = open_store(keyring=None if backend == "memory" else RING, clock=clock)
    for i in range(5):
        clock.advance(10)
        await store.create(ALICE, f"c{i}")
        await store.append(ALICE, f"c{i}", [user(f"note {i}: the token is ZX-99 " + FILLER * 20)])
    found = await store.search(ALICE, "ZX-99", max_conversations=2)
    assert not found.complete
    assert found.conversations == 2
    assert found.note is not None
    assert "max_conversations" in found.note
    assert {h.conversation_id for h in found.hits} == {"c4", "c3"}  # the most recently updated
    if backend != "memory":  # memory keeps objects: it has no bytes to count
        by_bytes = await store.search(ALICE, "ZX-99", max_bytes=3_000)
        assert not by_bytes.complete
        assert "max_bytes" in (by_bytes.note or "")
        assert 1 <= by_bytes.conversations < 5
        assert (await store.search(ALICE, "ZX-99")).conversations == 5


# -- how text is cut into words ------------------------------------------------------------------------
WORDY = {
    "paths": "Read /srv/app/deploy.toml before the rollout.",
    "urls": "The build log is at https://ci.example.com/builds/812?tab=log for now.",
    "mail": "Write to ops.team@example.org when it breaks.",
    "idents": "Ticket DEP-4471 touches snake_case_name and kebab-case-id; see café—naïve notes.",
    "rocket": "Lift-off \U0001f680launch at noon.",
    "lunch": "Nothing to see here: lunch is soup.",
}
CUTS = {
    "app": {"paths"},  # a path component
    "deploy": {"paths"},
    "deploy.toml": {"paths"},  # a file name with its extension
    "/srv/app/deploy.toml": {"paths"},  # the whole path, as written
    "srv/app": {"paths"},
    "toml.deploy": set(),  # the words of a term are a phrase: in its order
    "srv/deploy.toml": set(),  # and adjacent
    "ci.example.com": {"urls"},  # a host in a URL
    "812": {"urls"},
    "https://ci.example.com/builds/812?tab=log": {"urls"},
    "ops.team": {"mail"},  # an email's local part
    "ops": {"mail"},
    "example": {"urls", "mail"},
    "ops.team@example.org": {"mail"},
    "DEP-4471": {"idents"},  # a full identifier with a dash
    "4471": {"idents"},
    "snake": {"idents"},  # snake_case
    "case_name": {"idents"},
    "kebab-case-id": {"idents"},
    "naïve": {"idents"},  # an em dash separates words
    "launch": {"rocket"},  # so does an emoji
    "deploy soup": {"paths", "lunch"},  # any word of a query matches
}


async def test_paths_hosts_emails_and_identifiers_are_found_alike_on_every_store(
    store: Store, backend: str
) -> None:
    """Punctuation separates words (SQLite's unicode61 tokenizer, PostgreSQL's index since
    ``0005_search_punctuation_separates_words``, a substring in memory), so a part of a path,
    URL, email or identifier finds its message on every store, and the whole still does."""
    for cid, text in WORDY.items():
        await store.create(ALICE, cid)
        await store.append(ALICE, cid, [user(text)], expected_version=0)
    found: dict[str, set[str]] = {}
    for query in CUTS:
        results = await store.search(ALICE, query)
        assert results.method == METHOD[backend]
        found[query] = {h.conversation_id for h in results.hits}
    assert found == CUTS


async def test_a_snippet_shows_the_word_found_inside_a_path_of_a_long_message(store: Store) -> None:
    await store.create(ALICE, "long")
    text = FILLER * 8 + "The file /srv/app/deploy.toml sets the gate. " + FILLER * 8
    await store.append(ALICE, "long", [user(text)], expected_version=0)
    (hit,) = (await store.search(ALICE, "deploy")).hits
    assert "/srv/app/deploy.toml" in hit.snippet
    assert len(hit.snippet) < 400


@pytest.mark.postgres
async def test_a_postgres_index_of_the_previous_schema_is_recomputed_by_the_upgrade(
    pg_dsn: str, pg_schema: str
) -> None:
    """A database whose index was built under ``0004_compaction_records_search`` (paths and hosts
    kept as one token) finds their parts once ``0005_search_punctuation_separates_words`` ran:
    the migration recomputes the rows already indexed, without indexing them again."""

    def run(query: str) -> list[tuple[object, ...]]:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
            cursor = conn.execute(query.encode())
            return cursor.fetchall() if cursor.description else []

    def matching(word: str) -> int:
        rows = run(f"SELECT count(*) FROM tether_search WHERE tsv @@ to_tsquery('simple', '{word}')")
        return int(str(rows[0][0]))

    store = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        for cid, text in WORDY.items():
            await store.create(ALICE, cid)
            await store.append(ALICE, cid, [user(text)], expected_version=0)
        assert _where(await store.search(ALICE, "soup")) == [("lunch", 1)]  # indexes every row
    finally:
        await store.close()
    # the database as the previous release left it: 0004's column, no 0005
    run("ALTER TABLE tether_search DROP COLUMN tsv")
    run("DROP FUNCTION tether_search_words(text)")
    run(
        "ALTER TABLE tether_search ADD COLUMN tsv TSVECTOR "
        "GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED"
    )
    run("CREATE INDEX tether_search_tsv ON tether_search USING GIN (tsv)")
    run("DELETE FROM tether_migrations WHERE name = '0005_search_punctuation_separates_words'")
    assert matching("deploy") == 0  # the defect: one token for the whole path
    assert matching("ops") == 0
    rows = run("SELECT count(*) FROM tether_search")
    indexed = run("SELECT id, indexed FROM tether_conversations ORDER BY id")
    assert rows == [(len(WORDY),)]
    upgraded = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        await upgraded.create(ALICE, "after")  # opening migrates
        assert matching("deploy") == 1  # recomputed by the migration, before any search
        assert matching("ops") == 1
        assert run("SELECT count(*) FROM tether_search") == rows
        assert run("SELECT id, indexed FROM tether_conversations WHERE id != 'after' ORDER BY id") == indexed
        assert ("0005_search_punctuation_separates_words",) in run("SELECT name FROM tether_migrations")
        found: dict[str, set[str]] = {}
        for query in CUTS:
            found[query] = {h.conversation_id for h in (await upgraded.search(ALICE, query)).hits}
        assert found == CUTS
    finally:
        await upgraded.close()
