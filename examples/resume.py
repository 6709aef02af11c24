"""A run that fails in the middle of a tool batch, then resumes from ``partial.messages``.

    python examples/resume.py

The failing tool is declared ``propagate=True``, so its exception ends the run with a
``ToolError``. The evidence ends at the assistant turn that requested the batch; resuming repairs
the unanswered calls (a neutral "interrupted before execution" result) and the model carries on.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether import Message, RunError, ToolCall, assistant
from tether.agent import Agent, Tool
from tether.models.testing import FunctionInfo, FunctionModel


def fetch_rates(currency: str) -> str:
    """Look up exchange rates."""
    return f"1 {currency} = 1.08 USD"


def book_flight(destination: str) -> str:
    """Book a flight (the booking service is down)."""
    raise ConnectionError("booking service unavailable")


def model(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
    last = messages[-1]
    if last.role == "user" and last.text == "plan my trip":
        return assistant(
            ToolCall("call_rates", "fetch_rates", '{"currency": "EUR"}'),
            ToolCall("call_book", "book_flight", '{"destination": "Lisbon"}'),
        )
    if last.role == "user":  # "continue": the repaired results are right before this message
        results = [r for m in messages if m.role == "tool" for r in m.tool_results]
        return "resumed; earlier results: " + "; ".join(f"{r.name}: {r.text}" for r in results)
    return "unexpected"


def main() -> None:
    agent = Agent(FunctionModel(model), tools=[fetch_rates, Tool(book_flight, propagate=True)])
    try:
        agent.run_sync("plan my trip")
    except RunError as err:
        print(f"run failed at stage {err.stage!r}: {err}")
        partial = err.partial
        assert partial is not None
        print(f"partial evidence: {len(partial.messages)} messages, last is {partial.messages[-1].role}")
        resumed = agent.run_sync("continue", history=partial.messages)
        print("repaired calls:", [c.call_id for c in resumed.repair.synthesized])
        print(resumed.output)
        assert resumed.conversation_id == partial.conversation_id
        return
    raise SystemExit("the run was expected to fail")


if __name__ == "__main__":
    main()
