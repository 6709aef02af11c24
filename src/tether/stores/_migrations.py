"""Named schema migrations. Each runs in one transaction with the row recording its name.

Migrations are append-only: a released migration is never edited; a schema change is a new
named step at the end of the list. ``tether_migrations`` holds the names applied.
"""

from __future__ import annotations

__all__ = ["POSTGRES", "SQLITE"]

SQLITE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0001_conversations_messages_ledger",
        (
            """CREATE TABLE tether_conversations (
                pk INTEGER PRIMARY KEY,
                owner TEXT NOT NULL,
                id TEXT NOT NULL,
                version INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                preview_key TEXT,
                preview BLOB,
                last_model TEXT,
                forked_from TEXT,
                forked_at INTEGER,
                open_effects INTEGER NOT NULL DEFAULT 0,
                UNIQUE (owner, id)
            )""",
            "CREATE INDEX tether_conversations_owner_updated ON tether_conversations (owner, updated_at)",
            # id = conversation * 2**32 + seq: the rowid clusters a conversation's rows in order,
            # so a load is one range scan of the table (rows are ~1 KB: too big for WITHOUT ROWID)
            """CREATE TABLE tether_messages (
                id INTEGER PRIMARY KEY,
                conversation INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                key_id TEXT,
                data BLOB NOT NULL,
                CHECK (id = conversation * 4294967296 + seq)
            )""",
            """CREATE TABLE tether_tool_effects (
                conversation INTEGER NOT NULL,
                call_id TEXT NOT NULL,
                run_id TEXT NOT NULL,
                tool_name TEXT NOT NULL,
                arguments_key TEXT,
                arguments BLOB NOT NULL,
                started_at REAL NOT NULL,
                finished_at REAL,
                failed INTEGER NOT NULL DEFAULT 0,
                stored_seq INTEGER,
                PRIMARY KEY (conversation, call_id, run_id)
            )""",
        ),
    ),
    (
        "0002_replay_guards",
        (
            # single-use token digests (HMAC outputs: not owner-scoped), kept until they expire
            """CREATE TABLE tether_replay_guards (
                digest TEXT PRIMARY KEY,
                expires_at REAL NOT NULL
            ) WITHOUT ROWID""",
            "CREATE INDEX tether_replay_guards_expires ON tether_replay_guards (expires_at)",
        ),
    ),
    (
        "0003_store_meta",
        # facts about the database as a whole; ('encryption', 'sealed') once every row is sealed
        ("CREATE TABLE tether_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",),
    ),
    (
        "0004_compaction_records_search",
        (
            # compaction records beside the log (ADR 0010); data is the record's JSON, sealed with
            # kind 'compaction' when encryption is on; the latest record is the highest pk
            """CREATE TABLE tether_compactions (
                pk INTEGER PRIMARY KEY,
                conversation INTEGER NOT NULL,
                id TEXT NOT NULL,
                boundary INTEGER NOT NULL,
                key_id TEXT,
                data BLOB NOT NULL,
                UNIQUE (conversation, id)
            )""",
            # how many of a conversation's messages the full-text index holds: the index (an FTS5
            # table made when the connection opens, if this SQLite has FTS5) catches up on search
            "ALTER TABLE tether_conversations ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    (
        "0005_deleted_conversations",
        (
            # a deleted conversation's (owner, id), whichever way it was deleted (delete, purge):
            # create, fork and a run's lazy creation refuse the id, so a deleted conversation stays
            # deleted (a run that raced the delete cannot bring it back)
            """CREATE TABLE tether_deleted (
                owner TEXT NOT NULL,
                id TEXT NOT NULL,
                deleted_at REAL NOT NULL,
                PRIMARY KEY (owner, id)
            )""",
            "CREATE TRIGGER tether_conversations_deleted AFTER DELETE ON tether_conversations BEGIN "
            "INSERT OR IGNORE INTO tether_deleted (owner, id, deleted_at) "
            "VALUES (OLD.owner, OLD.id, (julianday('now') - 2440587.5) * 86400.0); END",
        ),
    ),
)

POSTGRES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0001_conversations_messages_ledger",
        (
            """CREATE TABLE tether_conversations (
                pk BIGSERIAL PRIMARY KEY,
                owner TEXT NOT NULL,
                id TEXT NOT NULL,
                version BIGINT NOT NULL DEFAULT 0,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                preview_key TEXT,
                preview BYTEA,
                last_model TEXT,
                forked_from TEXT,
                forked_at BIGINT,
                open_effects BIGINT NOT NULL DEFAULT 0,
                UNIQUE (owner, id)
            )""",
            "CREATE INDEX tether_conversations_owner_updated ON tether_conversations (owner, updated_at)",
            """CREATE TABLE tether_messages (
                conversation BIGINT NOT NULL REFERENCES tether_conversations (pk) ON DELETE CASCADE,
                seq BIGINT NOT NULL,
                key_id TEXT,
                data BYTEA NOT NULL,
                PRIMARY KEY (conversation, seq)
            )""",
            """CREATE TABLE tether_tool_effects (
                conversation BIGINT NOT NULL REFERENCES tether_conversations (pk) ON DELETE CASCADE,
                call_id TEXT NOT NULL,
                run_id TEXT NOT NULL,
                tool_name TEXT NOT NULL,
                arguments_key TEXT,
                arguments BYTEA NOT NULL,
                started_at DOUBLE PRECISION NOT NULL,
                finished_at DOUBLE PRECISION,
                failed BOOLEAN NOT NULL DEFAULT FALSE,
                stored_seq BIGINT,
                PRIMARY KEY (conversation, call_id, run_id)
            )""",
        ),
    ),
    (
        "0002_replay_guards",
        (
            # single-use token digests (HMAC outputs: not owner-scoped), kept until they expire
            """CREATE TABLE tether_replay_guards (
                digest TEXT PRIMARY KEY,
                expires_at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX tether_replay_guards_expires ON tether_replay_guards (expires_at)",
        ),
    ),
    (
        "0003_store_meta",
        # facts about the database as a whole; ('encryption', 'sealed') once every row is sealed
        ("CREATE TABLE tether_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",),
    ),
    (
        "0004_compaction_records_search",
        (
            """CREATE TABLE tether_compactions (
                pk BIGSERIAL PRIMARY KEY,
                conversation BIGINT NOT NULL REFERENCES tether_conversations (pk) ON DELETE CASCADE,
                id TEXT NOT NULL,
                boundary BIGINT NOT NULL,
                key_id TEXT,
                data BYTEA NOT NULL,
                UNIQUE (conversation, id)
            )""",
            # the full-text index of plaintext messages ('simple': no stemming, identifiers kept)
            """CREATE TABLE tether_search (
                conversation BIGINT NOT NULL REFERENCES tether_conversations (pk) ON DELETE CASCADE,
                seq BIGINT NOT NULL,
                role TEXT NOT NULL,
                body TEXT NOT NULL,
                tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                PRIMARY KEY (conversation, seq)
            )""",
            "CREATE INDEX tether_search_tsv ON tether_search USING GIN (tsv)",
            "ALTER TABLE tether_conversations ADD COLUMN indexed BIGINT NOT NULL DEFAULT 0",
        ),
    ),
    (
        "0005_search_punctuation_separates_words",
        (
            # the text as the index and the queries tokenize it: every run of punctuation, symbols
            # and white space becomes one space (ASCII other than letters and digits, '_' included,
            # and the punctuation, symbol and emoji blocks of Unicode; spelled out as code points
            # because a character class would follow the database's locale), so
            # '/srv/app/deploy.toml' is 'srv app deploy toml' as in SQLite's unicode61 tokenizer
            "CREATE OR REPLACE FUNCTION tether_search_words(body TEXT) RETURNS TEXT "
            "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE "
            "AS $$ SELECT regexp_replace(body, '["
            r"\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f"  # ASCII
            r"\u0080-\u00a9\u00ab-\u00b1\u00b4\u00b6-\u00b8\u00bb\u00bf\u00d7\u00f7"  # Latin-1
            r"\u2000-\u206f\u20a0-\u20cf\u2190-\u245f\u2500-\u2bff\u2e00-\u2e7f"  # punctuation, symbols
            r"\u3000-\u3003\u3008-\u3011\u3014-\u301f\ufe10-\ufe19\ufe30-\ufe6b"  # CJK, vertical, small forms
            r"\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"  # full-width punctuation
            r"\U0001f000-\U0001faff"  # emoji and pictographs
            "]+', ' ', 'g') $$",
            # replacing the generated column recomputes it for every row already indexed
            "ALTER TABLE tether_search DROP COLUMN tsv",
            "ALTER TABLE tether_search ADD COLUMN tsv TSVECTOR "
            "GENERATED ALWAYS AS (to_tsvector('simple', tether_search_words(body))) STORED",
            "CREATE INDEX tether_search_tsv ON tether_search USING GIN (tsv)",
        ),
    ),
    (
        "0006_deleted_conversations",
        (
            # as SQLite's 0005: a deleted conversation's (owner, id), kept by a trigger
            """CREATE TABLE tether_deleted (
                owner TEXT NOT NULL,
                id TEXT NOT NULL,
                deleted_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (owner, id)
            )""",
            "CREATE FUNCTION tether_remember_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO tether_deleted (owner, id, deleted_at) "
            "VALUES (OLD.owner, OLD.id, extract(epoch FROM clock_timestamp())) "
            "ON CONFLICT (owner, id) DO NOTHING; RETURN OLD; END $$",
            "CREATE TRIGGER tether_conversations_deleted AFTER DELETE ON tether_conversations "
            "FOR EACH ROW EXECUTE FUNCTION tether_remember_deleted()",
        ),
    ),
)
