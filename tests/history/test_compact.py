"""Compaction, the pure parts: elide, the summary view, the boundary, the token tally and trigger,
the summarizer input and the keyword search."""

from __future__ import annotations

import itertools

import pytest

from tether import (
    Document,
    HistoryError,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    UserError,
    assistant,
    system,
    tool,
    user,
)
from tether.history import (
    ELIDED_PREFIX,
    SUMMARY_CLOSE,
    SUMMARY_OPEN,
    TokenTally,
    Trigger,
    approximate_counter,
    check_history,
    compacted_view,
    compaction_boundary,
    elide,
    is_elided,
    query_terms,
    render_message,
    search_messages,
    split_summary,
    summary_chunks,
    summary_input,
    summary_part,
)

BIG = "x" * 14_210


def _chat() -> list[Message]:
    return [
        user("read the config", run_id="r1", conversation_id="c1"),  # 0
        assistant(
            Reasoning("thinking " * 60),  # unsigned: elided
            Reasoning("signed " * 60, signature="sig-1", provider="anthropic"),  # kept
            ToolCall("call_1", "read_file", '{"path": "src/app.py"}', signature="gsig"),
            run_id="r1",
        ),  # 1
        tool(ToolResult("call_1", "read_file", (Text(BIG),)), run_id="r1"),  # 2
        assistant("the config sets port 8443"),  # 3
        user("now the logs"),  # 4
        assistant(ToolCall("call_2", "read_logs", "{}")),  # 5
        tool(ToolResult("call_2", "read_logs", (Text("short"),), failed=True)),  # 6
        assistant("logs are fine"),  # 7
    ]


# -- elide ------------------------------------------------------------------------------------------
def test_elide_replaces_old_tool_output_with_a_sized_placeholder_and_keeps_the_pair() -> None:
    history = _chat()
    out, report = elide(history, keep_last=4)
    result = out[2].tool_results[0]
    assert result.content == (Text("[elided: 14,210 bytes of read_file output; use recall to fetch it]"),)
    assert (result.call_id, result.name, result.failed) == ("call_1", "read_file", False)
    assert out[2].run_id == "r1"
    call = out[1].tool_calls[0]
    assert (call.id, call.arguments, call.signature) == ("call_1", '{"path": "src/app.py"}', "gsig")
    assert check_history(out) == []
    assert report.elided[1].bytes == 14_210
    assert [(p.message, p.part, p.kind, p.name) for p in report.elided] == [
        (1, 0, "reasoning", None),
        (2, 0, "tool-result", "read_file"),
    ]


def test_elide_keeps_signed_reasoning_byte_for_byte_and_lists_it() -> None:
    out, report = elide(_chat(), keep_last=4)
    unsigned, signed = out[1].parts[0], out[1].parts[1]
    assert isinstance(unsigned, Reasoning)
    assert isinstance(signed, Reasoning)
    assert unsigned.text.startswith(ELIDED_PREFIX)
    assert "bytes of reasoning" in unsigned.text
    assert signed == _chat()[1].parts[1]
    assert report.kept == ((1, 1),)


def test_elide_leaves_the_recent_window_text_and_small_results_alone() -> None:
    history = _chat()
    out, report = elide(history, keep_last=4, min_bytes=10)
    for i in (0, 3, 4, 5, 6, 7):
        assert out[i] is history[i]
    out, _ = elide(history, keep_last=0, min_bytes=10)
    assert out[6] is history[6]  # "short" is 5 bytes
    assert report.bytes == sum(p.bytes for p in report.elided)


def test_elide_twice_changes_nothing_more() -> None:
    once, _ = elide(_chat(), keep_last=0, min_bytes=0)
    twice, report = elide(once, keep_last=0, min_bytes=0)
    assert twice == once
    assert all(a is b for a, b in zip(once, twice, strict=True))
    assert not report.changed


def test_elide_names_media_and_drops_the_hint_on_request() -> None:
    history = [
        user("shot"),
        assistant(ToolCall("c", "screenshot", "{}")),
        tool(ToolResult("c", "screenshot", (Image(data=b"PNG!" * 100, media_type="image/png"), Text("ok")))),
        assistant("done"),
    ]
    out, _ = elide(history, keep_last=1, hint=None)
    assert out[2].tool_results[0].text == "[elided: 402 bytes of screenshot output (1 image)]"
    assert is_elided(out[2].tool_results[0].text)


def test_elide_rejects_bad_arguments_by_name() -> None:
    with pytest.raises(UserError, match="keep_last"):
        elide(_chat(), keep_last=-1)
    with pytest.raises(UserError, match="min_bytes"):
        elide(_chat(), min_bytes="1")  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"history\[1\]"):
        elide([user("a"), "b"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="elide"):
        elide(None)  # type: ignore[arg-type]


# -- the summary view --------------------------------------------------------------------------------
def test_summary_merges_into_a_user_message_after_the_boundary() -> None:
    history = _chat()
    view = compacted_view(history, "S: port 8443", 4)
    assert len(view) == 4
    assert view[0].role == "user"
    assert view[0].parts[1:] == history[4].parts
    assert view[1:] == history[5:]
    first = view[0].parts[0]
    assert isinstance(first, Text)
    assert first.text.startswith(SUMMARY_OPEN + "\n")
    assert first.text.endswith("S: port 8443\n" + SUMMARY_CLOSE)
    assert split_summary(view[0]) == ("S: port 8443", history[4])


def test_summary_goes_before_an_assistant_turn_as_its_own_user_message() -> None:
    history = _chat()
    view = compacted_view(history, "S", 5)
    assert [m.role for m in view] == ["user", "assistant", "tool", "assistant"]
    assert view[1:] == history[5:]
    assert split_summary(view[0]) == ("S", None)
    assert check_history(view) == []


def test_summary_alone_when_nothing_follows_the_boundary() -> None:
    view = compacted_view(_chat(), "S", 8)
    assert len(view) == 1
    assert split_summary(view[0]) == ("S", None)
    assert compacted_view(_chat(), None, 8) == []


def test_a_boundary_where_no_request_can_open_is_refused() -> None:
    with pytest.raises(HistoryError, match=r"message 2 .tool.*message 3"):
        compacted_view(_chat(), "S", 2)
    with pytest.raises(HistoryError, match=r"message 0 .system"):
        compacted_view([system("s"), user("u")], "S", 0)
    with pytest.raises(UserError, match="boundary"):
        compacted_view(_chat(), "S", 9)
    with pytest.raises(UserError, match="non-empty"):
        compacted_view(_chat(), "  ", 4)


def test_split_summary_ignores_ordinary_user_text() -> None:
    m = user(SUMMARY_OPEN + " is a tag I like")
    assert split_summary(m) == (None, m)
    assert split_summary(assistant("x")) == (None, assistant("x"))
    part = summary_part("multi\n\nline summary", note=None)
    assert split_summary(user(part)) == ("multi\n\nline summary", None)


# -- the boundary --------------------------------------------------------------------------------------
def test_boundary_fits_the_target_and_opens_a_request() -> None:
    history = _chat() * 3
    tally = TokenTally()
    total = tally.update(history)
    for target in (50, 200, total // 2, total - 1):
        b = compaction_boundary(history, tally, start=0, target=target)
        if b is None:
            continue
        assert 0 < b < len(history)
        assert history[b].role in ("user", "assistant")
        assert check_history(compacted_view(history, "S", b)) == []
        # the smallest such boundary: one message earlier would not fit (or could not open)
        assert tally.between(b, len(history)) <= target or b == len(history) - 1


def test_boundary_never_goes_back_past_the_previous_one() -> None:
    history = _chat() * 3
    tally = TokenTally()
    b = compaction_boundary(history, tally, start=12, target=10**9)
    assert b is not None
    assert b > 12
    assert compaction_boundary(history, tally, start=len(history) - 1, target=0) is None


def test_boundary_with_target_zero_keeps_only_the_newest_turn() -> None:
    history = _chat()
    tally = TokenTally()
    assert compaction_boundary(history, tally, start=0, target=0) == 7
    # ending mid-turn (tool results last): the latest point that can open is the requesting turn
    assert compaction_boundary(history[:7], tally, start=0, target=0) == 5


# -- tally and trigger ----------------------------------------------------------------------------------
class _Counting:
    def __init__(self) -> None:
        self.calls = 0
        self.inner = approximate_counter()

    def __call__(self, message: Message) -> int:
        self.calls += 1
        return self.inner(message)


def test_tally_counts_only_new_messages_of_a_growing_list() -> None:
    counter = _Counting()
    tally = TokenTally(counter)
    history = _chat()
    grown: list[Message] = []
    for m in history:
        grown.append(m)
        tally.update(grown)
    assert counter.calls == len(history)
    assert tally.total == sum(approximate_counter()(m) for m in history)
    assert tally.between(2, 5) == sum(approximate_counter()(m) for m in history[2:5])


def test_tally_recounts_another_list_through_the_cache() -> None:
    counter = _Counting()
    tally = TokenTally(counter, cache_size=100)
    history = _chat()
    tally.update(history)
    other = [Message(m.role, m.parts, run_id=m.run_id) for m in reversed(history)]
    assert tally.update(other) == sum(approximate_counter()(m) for m in other)
    assert tally.update([]) == 0


def test_trigger_limits_and_goal() -> None:
    t = Trigger(10_000, reserve=2_000, overhead=400)
    assert t.usable == 8_000
    assert t.limit == 6_000
    assert t.goal == 3_600
    assert t.due(6_001)
    assert not t.due(6_000)
    assert t.at(0.6) == 4_400
    for bad in (
        {"window": 0},
        {"window": 100, "reserve": 100},
        {"window": 100, "threshold": 1.5},
        {"window": 100, "target": 0.9},
        {"window": 100, "threshold": True},
        {"window": 100, "overhead": -1},
    ):
        with pytest.raises(UserError):
            Trigger(**bad)  # type: ignore[arg-type]


# -- summarizer input -------------------------------------------------------------------------------------
def test_summary_input_holds_the_previous_summary_and_only_the_aged_out_range() -> None:
    history = _chat()
    text = summary_input(history, previous="PREVIOUS", start=4, end=7, offset=100)
    assert text.startswith("<previous-summary>\nPREVIOUS\n</previous-summary>")
    assert '<messages first="104" last="106">' in text
    assert "[104] user: now the logs" in text
    assert "call read_logs (call_2): {}" in text
    assert "[106] tool result of read_logs (call_2, failed): short" in text
    assert "read the config" not in text
    assert "logs are fine" not in text


def test_summary_input_takes_an_embedded_summary_as_the_previous_one() -> None:
    view = compacted_view(_chat(), "EARLIER", 4)
    text = summary_input(view, previous=None, start=0, end=2)
    assert text.startswith("<previous-summary>\nEARLIER\n</previous-summary>")
    assert "[0] user: now the logs" in text
    assert SUMMARY_OPEN not in text
    alone = compacted_view(_chat(), "EARLIER", 5)
    assert "[0]" not in summary_input(alone, previous=None, start=0, end=2)


def test_summary_input_clips_huge_parts_and_describes_media() -> None:
    history = [
        user("look", Image(url="https://e.com/a.png"), Document(data=b"%PDF", media_type="application/pdf")),
        *_chat()[1:4],
    ]
    text = summary_input(history, previous=None, start=0, end=3, max_part_chars=300)
    assert "[image: https://e.com/a.png]" in text
    assert "[document: application/pdf, 4 bytes inline]" in text
    assert "characters omitted" in text
    assert len(text) < 2_000
    with pytest.raises(UserError, match="start"):
        summary_input(history, previous=None, start=2, end=2)


def test_summary_chunks_cover_the_range_in_order_within_the_budget() -> None:
    history = _chat() * 4
    chunks = summary_chunks(history, 3, 30, 2_000)
    assert chunks[0][0] == 3
    assert chunks[-1][1] == 30
    assert all(a[1] == b[0] for a, b in itertools.pairwise(chunks))
    count = approximate_counter()

    def size(i: int, j: int) -> int:
        return sum(count(user(render_message(history[k], k))) for k in range(i, j))

    assert all(size(i, j) <= 2_000 or j == i + 1 for i, j in chunks)
    # at most two: the newest messages are kept, the oldest left out
    newest = summary_chunks(history, 3, 30, 2_000, max_chunks=2)
    assert newest == chunks[-2:]
    with pytest.raises(UserError, match="max_chunks"):
        summary_chunks(history, 3, 30, 2_000, max_chunks=0)


def test_render_message_lines() -> None:
    assert render_message(user("hi"), 3) == "[3] user: hi"
    text = render_message(_chat()[1])
    assert text.startswith("assistant:")
    assert '    call read_file (call_1): {"path": "src/app.py"}' in text
    assert render_message(Message("tool"), 1) == "[1] tool: (no results)"


# -- search -------------------------------------------------------------------------------------------------
def test_search_ranks_rare_terms_and_bounds_excerpts() -> None:
    history = [
        user("deploy ticket DEP-4471 must ship before friday"),
        assistant("noted"),
        user("the port is 8443"),
        assistant(ToolCall("c9", "read_file", '{"path": "src/app.py"}')),
        tool(ToolResult("c9", "read_file", (Text("y" * 5_000 + " DEP-4471 appears here " + "z" * 5_000),))),
    ]
    hits = search_messages(history, "DEP-4471", limit=5, max_chars=200, offset=10)
    assert [h.position for h in hits] == [14, 10]  # ties go to the more recent message
    assert "DEP-4471" in hits[0].excerpt
    assert len(hits[0].excerpt) <= 200
    assert hits[0].length > 10_000
    assert search_messages(history, "src/app.py")[0].position == 3
    assert search_messages(history, "nothing-like-this") == []
    assert query_terms("  src/app.py, DEP-4471 and 1e-3!") == ["src/app.py", "dep-4471", "and", "1e-3"]
