"""Long conversations through ``tether serve``: compacted at 80% of the model's context window, as
``tether chat`` does, so a conversation that outgrows the window goes on working; the stored log
keeps every message, the stream says when it happened (``history.compacted``, AG-UI ``CUSTOM``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.serve._serve_support import Database, Server, add_user, new_conversation, read_events, start_run
from tests.serve.scripted import SMALL_WINDOW
from tests.serve.test_agui import agui, of, run_input

MODEL = "py:tests.serve.scripted:small_window"
ABSENT = "01a00000-0000-7000-8000-000000000000"


def _converse(client: Any, cid: str, prompts: range) -> list[dict[str, Any]]:
    """One run per prompt; every run must complete. The ``history.compacted`` events seen."""
    compacted: list[dict[str, Any]] = []
    for i in prompts:
        events = [got.data for got in read_events(client, start_run(client, cid, f"message {i}"))]
        assert events[-1]["type"] == "run.completed", events[-1]
        compacted += [e for e in events if e["type"] == "history.compacted"]
    return compacted


def test_a_conversation_past_the_window_is_compacted_and_keeps_working(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    server = servers(db, model=MODEL)
    with server.client(token) as client:
        cid = new_conversation(client)
        compacted = _converse(client, cid, range(16))  # 16 exchanges of 84 tokens: 1.3 windows
        assert compacted, "16 exchanges of 84 tokens in a 1,000-token window were never compacted"
        first = compacted[0]
        report = first["report"]
        assert report["window"] == SMALL_WINDOW
        assert report["tokens_after"] < report["tokens_before"] <= SMALL_WINDOW
        assert report["steps"]
        assert report["record_id"]
        assert first["line"].startswith("compacted ")
        assert {first["run_id"], first["conversation_id"]} <= {e["run_id"] for e in compacted} | {cid}
        records = client.get(f"/v1/conversations/{cid}/compactions").json()["compactions"]
        assert [r["id"] for r in records][: len(compacted)] == [e["report"]["record_id"] for e in compacted]
        assert records[0]["boundary"] == report["boundary"]
        assert records[0]["previous_boundary"] == 0
        assert records[0]["summary"].startswith("word1 ")  # what the (scripted) summarizer wrote
        assert records[0]["tokens_before"] == report["tokens_before"]
        assert client.get(f"/v1/conversations/{ABSENT}/compactions").status_code == 404
        # the log is never rewritten: every prompt and answer is stored, in order
        stored = client.get(f"/v1/conversations/{cid}", params={"limit": 1000}).json()
        assert stored["version"] == 32
        prompts = [m["parts"][0]["text"] for m in stored["messages"] if m["role"] == "user"]
        assert prompts == [f"message {i}" for i in range(16)]
    server.stop()

    # without compaction the same exchanges outgrow the window: the model refuses the request
    plain = servers(db, model=MODEL, extra=["--no-compaction"])
    with plain.client(token) as client:
        cid = new_conversation(client)
        failed: list[dict[str, Any]] = []
        for i in range(16):
            events = [got.data for got in read_events(client, start_run(client, cid, f"message {i}"))]
            assert not [e for e in events if e["type"] == "history.compacted"]
            if events[-1]["type"] == "run.failed":
                failed.append(events[-1])
                break
        assert failed, "the window was never exceeded: the test proves nothing"
        assert "context window" in failed[0]["error"]["message"]


def test_agui_streams_say_when_the_thread_was_compacted(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, model=MODEL)
    with server.client(token) as client:
        thread = new_conversation(client)
        seen: list[dict[str, Any]] = []
        history: list[dict[str, Any]] = []
        for i in range(16):
            history = [*history, {"id": f"u{i}", "role": "user", "content": f"message {i}"}]
            events = agui(client, run_input(thread, history))  # every event validated by ag-ui
            assert events[-1]["type"] == "RUN_FINISHED"
            seen += [e for e in of(events, "CUSTOM") if e["name"] == "tether.compaction"]
            if seen:
                break
        assert seen, "the thread was never compacted"
        value = seen[0]["value"]
        assert value["line"].startswith("compacted ")
        assert value["report"]["tokens_after"] < value["report"]["tokens_before"]
