"""Values a hostile (or sloppy) client imports, through the real service over loopback, on SQLite
and PostgreSQL: ``true`` where a token count goes, a tool call whose arguments hold ``1e999`` or a
5,000-digit integer. Whatever is accepted stays readable: read, export in every format, fork and a
run answer, never 503 or 500 (ADR 0021)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from tests.serve._serve_support import Database, Server, add_user, start_run, wait_status

from tether.convert import FORMATS

BIG = "1" + "0" * 5_000

PYDANTIC_AI = [
    {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
    {
        "kind": "response",
        "parts": [{"part_kind": "text", "content": "hello"}],
        "usage": {"input_tokens": 3, "output_tokens": True, "cache_read_tokens": True},
    },
]
LANGCHAIN = [
    {"type": "human", "data": {"type": "human", "content": "hi"}},
    {
        "type": "ai",
        "data": {
            "type": "ai",
            "content": "hello",
            "usage_metadata": {"input_tokens": "3", "output_tokens": True, "total_tokens": 1.5},
        },
    },
]


def _tether_calls(arguments: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool-call", "id": "c1", "name": "f", "arguments": arguments}],
        },
        {"role": "tool", "parts": [{"type": "tool-result", "callId": "c1", "name": "f"}]},
        {"role": "assistant", "parts": [{"type": "text", "text": "done"}]},
    ]


def _readable(client: httpx.Client, cid: str) -> dict[str, Any]:
    """Read, export in every format, fork and run: every answer a success."""
    read = client.get(f"/v1/conversations/{cid}")
    assert read.status_code == 200, read.text
    exports: dict[str, Any] = {}
    for name in FORMATS:
        r = client.get(f"/v1/conversations/{cid}/export", params={"format": name})
        assert r.status_code == 200, (name, r.status_code, r.text[:300])
        exports[name] = r.json()["data"]
    fork = client.post(f"/v1/conversations/{cid}/fork")
    assert fork.status_code == 201, fork.text
    wait_status(client, start_run(client, cid, "next"), ("completed",))
    return exports


@pytest.mark.parametrize(
    ("fmt", "data"),
    [("pydantic_ai", PYDANTIC_AI), ("langchain", LANGCHAIN)],
    ids=["pydantic_ai", "langchain"],
)
def test_an_imported_count_that_is_not_a_count_never_makes_a_conversation_unreadable(
    db: Database, servers: Callable[..., Server], fmt: str, data: list[dict[str, Any]]
) -> None:
    server = servers(db, model="py:tests.serve.scripted:fast_words")
    with server.client(add_user(db, "alice")) as client:
        r = client.post("/v1/conversations/import", json={"format": fmt, "data": data})
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        _readable(client, cid)
        usage = client.get(f"/v1/conversations/{cid}").json()["messages"][1]["usage"]
        assert usage == {"inputTokens": 3} if fmt == "pydantic_ai" else usage == {}, usage


@pytest.mark.parametrize(
    "arguments",
    ['{"x": 1e999}', f'{{"x": {BIG}}}', '{"x": [-1e400]}'],
    ids=["1e999", "5000-digits", "-1e400"],
)
def test_a_stored_call_with_numbers_no_encoder_writes_exports_as_truncated_args(
    db: Database, servers: Callable[..., Server], arguments: str
) -> None:
    server = servers(db, model="py:tests.serve.scripted:fast_words")
    with server.client(add_user(db, "alice")) as client:
        r = client.post(
            "/v1/conversations/import", json={"format": "tether", "data": _tether_calls(arguments)}
        )
        assert r.status_code == 201, r.text
        exports = _readable(client, r.json()["id"])
    assert exports["anthropic"][1]["content"][0]["input"] == {"truncated_args": arguments}
    assert exports["gemini"][1]["parts"][0]["functionCall"]["args"] == {"truncated_args": arguments}
    chat_call = exports["openai_chat"][1]["tool_calls"][0]["function"]
    assert httpx.Response(200, content=chat_call["arguments"]).json() == {"truncated_args": arguments}


def _agui_body(thread: str, extra_field: bytes, arguments: str) -> bytes:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    messages = [
        {"id": "u1", "role": "user", "content": "look it up"},
        {"id": "a1", "role": "assistant", "toolCalls": [call]},
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "found"},
        {"id": "u2", "role": "user", "content": "go on", "x": "HOSTILE"},
    ]
    body = {"threadId": thread, "runId": "r1", "messages": messages, "tools": [], "context": []}
    return json.dumps(body).encode().replace(b'"HOSTILE"', extra_field)


@pytest.mark.parametrize(
    "extra_field",
    [BIG.encode(), b"1e99999999999999999999", b'{"\xff": -1e999}'],
    ids=["digits", "1e99", "utf8"],
)
def test_agui_input_with_hostile_values_never_answers_500(
    db: Database, servers: Callable[..., Server], extra_field: bytes
) -> None:
    """AG-UI input is client bytes: an unknown field holding what no decoder holds is skipped, a
    call whose arguments hold ``1e999`` is stored verbatim, and the thread stays readable and
    exportable in every format."""
    server = servers(db, model="py:tests.serve.scripted:fast_words")
    with server.client(add_user(db, "alice")) as client:
        body = _agui_body("t-hostile", extra_field, '{"q": 1e999, "n": ' + BIG + "}")
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        with client.stream("POST", "/v1/agui", content=body, headers=headers) as r:
            text = r.read().decode()
        assert r.status_code == 200, text
        assert "RUN_FINISHED" in text, text[-500:]
        listed = client.get("/v1/conversations").json()["conversations"]
        assert listed
        for conversation in listed:
            _readable(client, conversation["id"])
