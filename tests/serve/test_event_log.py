"""The EventLog and UserStore contract on SQLite and PostgreSQL (real file, real server)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.serve._serve_support import Database
from tests.serve.conftest import pg_database

from tether.errors import ConflictError, NotFound, StoreError, UserError
from tether.stores import PostgresStore, SQLiteStore
from tether.stores.events import ActiveRunLimit
from tether.stores.events._memory import MemoryEventLog
from tether.stores.events._postgres import PostgresEventLog
from tether.stores.events._sqlite import SQLiteEventLog

Open = Callable[[], Any]
MEMORY: dict[int, MemoryEventLog] = {}


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """The log's backend: memory (one instance stands for every process), SQLite, PostgreSQL."""
    if request.param == "memory":
        return Database("memory")
    if request.param == "sqlite":
        return Database("sqlite", path=tmp_path / "serve.db")
    return pg_database(request)


@pytest.fixture
async def open_log(db: Database) -> AsyncIterator[Open]:
    opened: list[Any] = []

    def make() -> Any:
        log: Any
        if db.kind == "memory":
            return MEMORY.setdefault(id(db), MemoryEventLog())
        if db.kind == "sqlite":
            log = SQLiteEventLog(db.path or "")
        else:
            log = PostgresEventLog(db.dsn or "", schema=db.schema)
        opened.append(log)
        return log

    yield make
    for log in opened:
        await log.close()


def ev(n: int) -> bytes:
    return b'{"type":"text.delta","n":%d}' % n


async def test_one_active_run_per_conversation_and_owner(open_log: Open) -> None:
    log = open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    with pytest.raises(ConflictError, match="r1"):
        await log.start_run("alice", "c1", "r2", "p1", ev(1))
    await log.start_run(
        "bob", "c1", "r3", "p1", ev(1)
    )  # the same id under another owner is another conversation
    assert await log.active_count("alice") == 1
    await log.append("r1", "p1", [ev(2)], status="completed")
    assert await log.active_count("alice") == 0
    await log.start_run("alice", "c1", "r4", "p1", ev(1))  # free again
    assert await log.active_count("bob") == 1


async def test_events_are_numbered_and_read_after_a_sequence(open_log: Open) -> None:
    log = open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    assert await log.append("r1", "p1", [ev(2), ev(3)]) == 3
    assert await log.append("r1", "p1", [ev(4)], status="completed") == 4
    other = open_log()  # another process: nothing cached
    for reader in (log, other):
        assert [e.seq for e in await reader.read("alice", "r1")] == [1, 2, 3, 4]
        assert [e.data for e in await reader.read("alice", "r1", 2, limit=1)] == [ev(3)]
        assert await reader.read("alice", "r1", 4) == []
    run = await other.get_run("alice", "r1")
    assert (run.status, run.last_seq, run.conversation_id) == ("completed", 4, "c1")


async def test_another_owner_sees_not_found_like_an_absent_run(open_log: Open) -> None:
    log = open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    for reader in (log, open_log()):
        with pytest.raises(NotFound) as theirs:
            await reader.read("bob", "r1")
        with pytest.raises(NotFound) as absent:
            await reader.read("bob", "nope")
        assert str(theirs.value) == str(absent.value).replace("nope", "r1")
        with pytest.raises(NotFound):
            await reader.get_run("bob", "r1")


async def test_only_the_holding_process_appends_to_a_running_run(open_log: Open) -> None:
    log = open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    with pytest.raises(ConflictError, match="held by process"):
        await log.append("r1", "p2", [ev(2)])
    taken = await log.take_over(
        "r1", from_status="running", to_status="interrupted", event=ev(2), holder="p1", process_id="p9"
    )
    assert taken is not None
    with pytest.raises(ConflictError, match="interrupted"):
        await log.append("r1", "p1", [ev(3)])
    assert [e.seq for e in await log.read("alice", "r1")] == [1, 2]


async def test_a_pause_is_taken_over_exactly_once(open_log: Open) -> None:
    log = open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    await log.append("r1", "p1", [ev(2)], status="paused", pause_id="pz", pause=b'{"secret":1}')
    paused = await log.get_run("alice", "r1")
    assert (paused.status, paused.pause_id, paused.pause) == ("paused", "pz", b'{"secret":1}')
    logs = [open_log() for _ in range(4)]
    wins = await asyncio.gather(
        *(
            other.take_over(
                "r1",
                from_status="paused",
                to_status="running",
                event=ev(3),
                process_id=f"p{i}",
                pause_id="pz",
            )
            for i, other in enumerate(logs)
        )
    )
    assert sum(w is not None for w in wins) == 1
    after = await log.get_run("alice", "r1")
    assert (after.status, after.pause, after.last_seq) == ("running", None, 3)
    wrong = await log.take_over("r1", from_status="paused", to_status="running", event=ev(4), pause_id="pz")
    assert wrong is None


async def test_delete_runs_refuses_an_active_run(open_log: Open) -> None:
    log = open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    with pytest.raises(ConflictError):
        await log.delete_runs("alice", "c1")
    await log.append("r1", "p1", [ev(2)], status="failed")
    assert await log.delete_runs("alice", "c1") == 1
    with pytest.raises(NotFound):
        await log.get_run("alice", "r1")


async def test_wait_wakes_a_reader_when_another_instance_appends(open_log: Open) -> None:
    writer, reader = open_log(), open_log()
    await writer.start_run("alice", "c1", "r1", "p1", ev(1))
    assert [e.seq for e in await reader.read("alice", "r1")] == [1]

    async def later() -> None:
        await asyncio.sleep(0.2)
        await writer.append("r1", "p1", [ev(2)])

    task = asyncio.create_task(later())
    deadline = asyncio.get_running_loop().time() + 5
    got: list[int] = []
    while not got and asyncio.get_running_loop().time() < deadline:
        await reader.wait("r1", 1, 5.0)
        got = [e.seq for e in await reader.read("alice", "r1", 1)]
    await task
    assert got == [2]


async def test_users_tokens_and_revocation(open_log: Open) -> None:
    users = open_log()
    token = await users.add_user("alice")
    second = await users.add_token("alice")
    assert await users.authenticate(token) == "alice"
    assert await users.authenticate(second) == "alice"
    assert await users.authenticate(token[:-2] + "xx") is None
    assert await users.authenticate("not a token") is None
    with pytest.raises(ConflictError):
        await users.add_user("alice")
    with pytest.raises(UserError):
        await users.add_user("bad name!")
    with pytest.raises(UserError, match="reserved: it owns tether chat's conversations"):
        await users.add_user("local")  # else that user would read the terminal's chats
    await users.revoke_user("alice")
    assert await users.authenticate(token) is None
    assert await users.authenticate(second) is None
    with pytest.raises(NotFound):
        await users.add_token("alice")
    listed = await users.users()
    assert [(u.name, u.tokens, u.revoked_at is not None) for u in listed] == [("alice", 0, True)]


@pytest.mark.parametrize(
    "db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_store_and_event_log_share_one_database_in_either_order(db: Database, open_log: Open) -> None:
    store: Any = (
        SQLiteStore(db.path or "") if db.kind == "sqlite" else PostgresStore(db.dsn or "", schema=db.schema)
    )
    try:
        log = open_log()
        await log.secret("approval")  # the serve_ migrations first
        cid = await store.create("alice")  # then the store's own: neither refuses the other's names
        await log.start_run("alice", cid, "r1", "p1", ev(1))
        assert (await store.info("alice", cid)).version == 0
        assert await log.secret("approval") == await open_log().secret("approval")
    finally:
        await store.close()


async def test_a_newer_serve_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    log = SQLiteEventLog(path)
    await log.secret("approval")
    await log.close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO tether_migrations (name, applied_at) VALUES ('serve_9999_future', 0)")
    conn.close()
    async with SQLiteStore(path) as store:  # the store ignores the service's names
        await store.create("alice")
    again = SQLiteEventLog(path)
    with pytest.raises(StoreError, match="serve_9999_future"):
        await again.secret("approval")
    await again.close()


async def test_simultaneous_starts_never_pass_max_active(open_log: Open) -> None:
    """The count of an owner's active runs and the insert are one step, on every instance (two
    instances stand for two processes): 20 simultaneous starts with a limit of 3 admit 3."""
    logs = [open_log(), open_log()]

    async def start(i: int) -> str:
        try:
            await logs[i % 2].start_run("alice", f"c{i}", f"r{i}", f"p{i % 2}", ev(1), max_active=3)
        except ActiveRunLimit as exc:
            return f"limit {exc.limit}"
        return "started"

    outcomes = await asyncio.gather(*(start(i) for i in range(20)))
    assert sorted(outcomes) == ["limit 3"] * 17 + ["started"] * 3
    assert await logs[0].active_count("alice") == 3
    await logs[0].start_run("bob", "c0", "rb", "p0", ev(1), max_active=3)  # per owner
    started = [f"r{i}" for i, o in enumerate(outcomes) if o == "started"]
    await logs[0].append(started[0], f"p{int(started[0][1:]) % 2}", [ev(2)], status="completed")
    await logs[1].start_run("alice", "c99", "r99", "p1", ev(1), max_active=3)  # a place came free


async def test_a_deleted_conversation_gets_no_run_and_a_racing_start_is_ordered(open_log: Open) -> None:
    """``delete_runs`` remembers the conversation: a later start is ``NotFound``; a start and a
    delete at the same moment are ordered (the start wins and the delete is refused, or the
    delete wins and the start is ``NotFound``), never both."""
    log, other = open_log(), open_log()
    await log.start_run("alice", "c1", "r1", "p1", ev(1))
    await log.append("r1", "p1", [ev(2)], status="completed")
    assert await log.delete_runs("alice", "c1") == 1
    with pytest.raises(NotFound, match="was deleted"):
        await other.start_run("alice", "c1", "r2", "p2", ev(1))
    await other.start_run("bob", "c1", "rb", "p2", ev(1))  # another owner's c1 is another conversation
    for i in range(20):
        cid = f"race{i}"

        async def start(cid: str = cid, i: int = i) -> str:
            try:
                await log.start_run("alice", cid, f"s{i}", "p1", ev(1))
            except NotFound:
                return "gone"
            return "started"

        async def delete(cid: str = cid) -> str:
            try:
                await other.delete_runs("alice", cid)
            except ConflictError:
                return "refused"
            return "deleted"

        outcome = set(await asyncio.gather(start(), delete()))
        assert outcome in ({"started", "refused"}, {"gone", "deleted"}), outcome
