"""Properties over every input family a store takes from its caller: whatever the value, only the
documented error escapes, and the same one on every store.

- id arguments (owner, conversation, run, call ids, tool names): ``UserError`` exactly when the
  value is not a non-empty ``str`` of at most 512 characters without NUL or lone surrogate;
  otherwise the call works or raises ``NotFound``/``ConflictError``.
- paging and version arguments: ``UserError`` exactly when the value is not an ``int`` from 0 to
  2**63 - 1; otherwise every store gives MemoryStore's answer.
- replay-guard digests: ``UserError`` exactly when not 64 lowercase hex characters.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import ConflictError, TetherError, UserError
from tether.stores import MemoryStore, PostgresStore, SQLiteStore, Store

from .conftest import Clock
from .test_arguments import MAX, _outcome, count_calls, fill, id_calls

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

odd_text = st.text(
    st.characters() | st.sampled_from(["\x00", "\ud800", "\udc00", "\udfff", "é", "😀", " ", "\n"]),
    max_size=8,
)
surrogate_text = st.tuples(
    st.text(max_size=4), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
).map("".join)
id_values = st.one_of(
    odd_text,
    surrogate_text,
    st.text(min_size=510, max_size=514, alphabet="ab"),
    st.integers(),
    st.binary(max_size=4),
    st.floats(),
    st.booleans(),
    st.lists(st.text(max_size=2), max_size=2),
)
count_values = st.one_of(
    st.integers(),
    st.integers(-(2**65), 2**65),
    st.sampled_from([-1, 0, 1, 6, 7, MAX, MAX + 1, -(2**63), 10**5000]),
    st.booleans(),
    st.floats(),
    st.text(max_size=3),
    st.none(),
)


def valid_id(value: object) -> bool:
    if not isinstance(value, str) or not 1 <= len(value) <= 512 or "\x00" in value:
        return False
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)


def valid_count(value: object, optional: bool) -> bool:
    if value is None:
        return optional
    return type(value) is int and 0 <= value <= MAX


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[Clock], Store]]:
    """Opens one store of the backend (its database fresh for this test)."""
    kind = str(request.param)

    def make(clock: Clock) -> Store:
        if kind == "memory":
            return MemoryStore(clock=clock)
        if kind == "sqlite":
            return SQLiteStore(tmp_path / "p.db", clock=clock)
        dsn = request.getfixturevalue("pg_dsn")
        return PostgresStore(dsn, schema=request.getfixturevalue("pg_schema"), clock=clock)

    return make


COUNT_NAMES = ["limit", "offset", "expected_version", "tail", "since", "at_version"]


def _run(loop: asyncio.AbstractEventLoop, call: Awaitable[Any]) -> Any:
    return loop.run_until_complete(call)


async def _error_of(call: Awaitable[object]) -> tuple[str, str]:
    """``("", "")`` when the call worked, else the error's type name and message. Anything but a
    TetherError propagates and fails the property."""
    try:
        await call
    except TetherError as exc:
        return type(exc).__name__, str(exc)
    return "", ""


def test_any_id_value_gives_user_error_exactly_when_invalid(make_store: Callable[[Clock], Store]) -> None:
    loop = asyncio.new_event_loop()
    store = make_store(Clock())
    cid = _run(loop, store.create("alice", "chat"))
    names = sorted(id_calls(store, cid))

    @PROPERTY
    @given(value=id_values, target=st.sampled_from(names))
    def check(value: object, target: tuple[str, str]) -> None:
        kind, message = _run(loop, _error_of(id_calls(store, cid)[target](value)))
        if valid_id(value):
            assert kind in ("", "NotFound", "ConflictError"), (target, value, message)
        else:
            assert kind == "UserError", (target, value, message)
            assert target[1] in message

    try:
        check()
    finally:
        _run(loop, store.close())
        loop.close()


def test_any_count_value_gives_memory_stores_answer(make_store: Callable[[Clock], Store]) -> None:
    loop = asyncio.new_event_loop()
    clock, reference_clock = Clock(), Clock()
    store, reference = make_store(clock), MemoryStore(clock=reference_clock)
    _run(loop, fill(store, clock))
    _run(loop, fill(reference, reference_clock))

    async def outcome(on: Store, name: str, value: object) -> tuple[str, object]:
        if name in ("limit", "offset"):
            return await _outcome(count_calls(on, "log")[name](value))
        if name == "expected_version":
            return await _outcome(on.append("bob", "log", [], expected_version=value))  # type: ignore[arg-type]
        if name == "at_version":
            try:
                fork = await on.fork("bob", "log", value)  # type: ignore[arg-type]
            except (UserError, ConflictError) as exc:
                return "error", type(exc).__name__
            got = await _outcome(on.load("bob", fork))
            await on.delete("bob", fork)
            return got
        return await _outcome(on.load("bob", "log", **{name: value}))

    @PROPERTY
    @given(
        value=count_values,
        name=st.sampled_from(["limit", "offset", "expected_version", "tail", "since", "at_version"]),
    )
    def check(value: object, name: str) -> None:
        got = _run(loop, outcome(store, name, value))
        assert got == _run(loop, outcome(reference, name, value)), (name, value)
        if not valid_count(value, optional=name != "offset"):
            assert got == ("error", "UserError"), (name, value)

    try:
        check()
    finally:
        _run(loop, store.close())
        loop.close()


_HEX = re.compile(r"[0-9a-f]{64}")
digests = st.one_of(
    st.binary(min_size=32, max_size=32).map(bytes.hex),
    st.binary(min_size=32, max_size=32).map(lambda b: b.hex().upper()),
    st.text(alphabet="0123456789abcdefg", min_size=62, max_size=66),
    odd_text,
    st.integers(),
    st.binary(max_size=33),
    st.none(),
)
expiries = st.one_of(
    st.floats(), st.integers(), st.booleans(), st.text(max_size=3), st.none(), st.just(2_000_000_000.0)
)


def test_any_claim_arguments_give_user_error_exactly_when_invalid(
    make_store: Callable[[Clock], Store],
) -> None:
    loop = asyncio.new_event_loop()
    store = make_store(Clock())

    @PROPERTY
    @given(digest=digests, expires_at=expiries)
    def check(digest: object, expires_at: object) -> None:
        good_digest = isinstance(digest, str) and _HEX.fullmatch(digest) is not None
        good_expiry = (type(expires_at) is float and 0 <= expires_at < float("inf")) or (
            type(expires_at) is int and 0 <= expires_at <= MAX
        )
        kind, message = _run(loop, _error_of(store.claim_token(digest, expires_at)))  # type: ignore[arg-type]
        if good_digest and good_expiry:
            assert kind == "", (digest, expires_at, message)
        else:
            assert kind == "UserError", (digest, expires_at, message)
            assert ("digest" if not good_digest else "expires_at") in message

    try:
        check()
    finally:
        _run(loop, store.close())
        loop.close()
