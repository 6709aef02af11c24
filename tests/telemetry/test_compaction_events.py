"""A compaction inside a run is a ``tether.history.compact`` event on the run span, with its
counts and flags (never the summary text), and the record write is a client span of the run."""

from __future__ import annotations

from pathlib import Path

from tether import Text, ToolCall, ToolResult, assistant, tool, user
from tether.agent import Agent, Compaction
from tether.models.testing import FunctionModel
from tether.stores import SQLiteStore

from .conftest import Otel


def _history(turns: int) -> list:
    out = []
    for i in range(turns):
        call = ToolCall(f"c{i}", "read_file", '{"path": "a.py"}')
        out += [
            user(f"step {i}"),
            assistant(call),
            tool(ToolResult(call.id or "", "read_file", (Text("x = 1\n" * 400),))),
            assistant(f"done {i}"),
        ]
    return out


async def test_a_compaction_is_an_event_on_the_run_span(otel: Otel, tmp_path: Path) -> None:
    summarizer = FunctionModel(lambda m, i: "SECRET-SUMMARY of the early steps", name="summarizer")
    agent = Agent(
        FunctionModel(lambda m, i: "ok", name="agent"),
        compaction=Compaction(summarizer=summarizer, window=8_000, strategies=("summarize",)),
        telemetry=otel.telemetry(),
    )
    async with SQLiteStore(tmp_path / "t.db") as store:
        await store.create("o", "c")
        await store.append("o", "c", _history(30))
        result = await agent.run("next", store=store, owner="o", conversation_id="c")
        assert len(result.compactions) == 1
        (run,) = otel.named("invoke_agent")
        (event,) = [e for e in run.events if e.name == "tether.history.compact"]
        attributes = dict(event.attributes or {})
        assert attributes["tether.compaction.steps"] == "summarize"
        assert attributes["tether.compaction.tokens_before"] > attributes["tether.compaction.tokens_after"]
        assert attributes["tether.compaction.fallback"] is False
        assert "SECRET" not in repr(attributes)
        writes = [s for s in otel.spans() if s.name == "append_record tether_compactions"]
        assert len(writes) == 1
        assert writes[0].parent is not None
        assert writes[0].parent.span_id == run.context.span_id
