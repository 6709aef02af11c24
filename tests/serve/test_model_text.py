"""Text a model streams with an emoji's UTF-16 pair split across two deltas reaches the event
stream and the stored conversation as the emoji: no failed run, nothing lost. A real ``tether
serve`` process, real HTTP on loopback, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

from tests.serve._serve_support import (
    SCRIPTED,
    Database,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
)

EMOJI = "\U0001f600"


def test_an_emoji_split_across_stream_deltas_reaches_the_events_and_the_store_whole(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    server = servers(db, model=f"{SCRIPTED}:split_emoji")
    with server.client(token) as client:
        cid = new_conversation(client)
        events = read_events(client, start_run(client, cid, "smile"))
        stored = client.get(f"/v1/conversations/{cid}").json()["messages"]
    kinds = [e.data["type"] for e in events]
    assert kinds[-1] == "run.completed", events[-1].data
    assert "run.failed" not in kinds
    streamed = "".join(e.data["text"] for e in events if e.data["type"] == "text.delta")
    assert streamed == f"smile {EMOJI} done"
    completed = [e.data["message"] for e in events if e.data["type"] == "message.completed"]
    assert completed[-1]["parts"][0]["text"] == f"smile {EMOJI} done"
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["parts"][0]["text"] == f"smile {EMOJI} done"
    assert "Traceback" not in server.log()
