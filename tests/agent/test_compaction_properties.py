"""Properties of the Compactor over random histories, windows, strategies and summarizers: every
view it sends pairs like the log (``check_history``), holds no system message and opens where a
request can open; records chain (each extends the previous boundary); it never raises for a
summarizer that fails."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from history.strategies import histories  # tests/history (tests/ is on sys.path)
from tether import Message
from tether.agent import Compaction, Compactor
from tether.history import check_history, normalize_history, split_summary
from tether.models.testing import FunctionInfo, FunctionModel

BEHAVIOURS = ("ok", "raise", "empty")


def _summarizer(behaviour: str) -> FunctionModel:
    def summarize(messages: Sequence[Message], info: FunctionInfo) -> str:
        if behaviour == "raise":
            raise OSError("down")
        if behaviour == "empty":
            return ""
        return f"summary of {len(messages[-1].text)} characters"

    return FunctionModel(summarize, name=behaviour)


@given(
    histories,
    st.integers(60, 2_000),
    st.sampled_from([("elide", "summarize"), ("summarize",), ("elide",), ()]),
    st.sampled_from(BEHAVIOURS),
    st.integers(0, 6),
    st.booleans(),
)
def test_every_view_the_compactor_sends_is_sendable(
    h: list[Message],
    window: int,
    strategies: tuple[str, ...],
    behaviour: str,
    keep_last: int,
    force_last: bool,
) -> None:
    history, _ = normalize_history(h)
    cfg = Compaction(
        summarizer=_summarizer(behaviour),
        strategies=strategies,  # type: ignore[arg-type]
        keep_last=keep_last,
        min_elide_bytes=0,
        summary_tokens=16,
    )
    compactor = Compactor(cfg, FunctionModel(lambda m, i: "x"), conversation_id="c")

    async def run() -> None:
        grown: list[Message] = []
        boundary = 0
        for index, m in enumerate(history):
            grown.append(m)
            if m.role in ("assistant", "system") and index != len(history) - 1:
                continue
            if not any(x.role != "system" for x in grown):
                continue
            force = force_last and index == len(history) - 1
            prepared = await compactor.prepare(grown, window=window, force=force)
            view = list(prepared.messages)
            # what the prefix itself breaks (a batch of results not all in yet, calls without ids)
            # may remain; compaction adds nothing
            broken = {(p.kind, p.call_id) for p in check_history([x for x in grown if x.role != "system"])}
            assert {(p.kind, p.call_id) for p in check_history(view)} <= broken
            assert all(v.role != "system" for v in view)
            assert view
            assert view[0].role in ("user", "assistant")
            if split_summary(view[0])[0] is not None or compactor.boundary:
                assert view[0].role == "user"
            for record in prepared.records:
                assert record.previous_boundary == boundary
                assert record.boundary > boundary
                boundary = record.boundary
            for report in prepared.reports:
                assert (report.error is not None) == report.fallback
                if behaviour != "ok" and "summarize" in report.steps:
                    raise AssertionError("a failing summarizer produced a summary")
        await compactor.aclose()

    asyncio.run(run())
