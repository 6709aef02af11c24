"""Toolsets: tools that are known only when a run starts (an MCP server's list, a plugin registry).

An agent's ``tools=`` may hold ``Toolset`` objects next to functions and ``Tool`` objects. At the
start of every run the agent asks each toolset for its current tools (``list_tools``); a run keeps
that list to its end, so the model, the ledger and the approvals see one fixed set of tools per
run. ``Agent.aclose()`` (or ``async with agent``) closes the toolsets.

``SchemaTool`` is a tool described by a JSON Schema instead of a Python signature: its arguments
reach the callable as one decoded JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from tether.errors import RunError, TetherError, UserError
from tether.messages import ToolCall
from tether.models import ToolDefinition

from ._context import RunContext
from ._tools import ArgumentsInvalid, Tool, ToolLike

__all__ = ["SchemaTool", "Toolset", "list_toolsets", "split_tools"]


@runtime_checkable
class Toolset(Protocol):
    """A source of tools asked at the start of each run."""

    async def list_tools(self) -> Sequence[Tool[Any]]:
        """The tools the next run may call."""
        ...

    async def aclose(self) -> None:
        """Release the connections behind the tools. Idempotent."""
        ...


ArgumentCheck = Callable[[dict[str, Any]], str | None]
"""Returns what is wrong with decoded arguments (a sentence for the model), or ``None``."""


class SchemaTool(Tool[Any]):
    """A tool whose parameters are a JSON Schema; ``call(arguments)`` receives the decoded object.

    ``check`` validates the decoded arguments against the schema (returns a sentence for the
    model, or ``None``); without it any JSON object is passed on. The other options are
    ``Tool``'s: ``idempotent=False`` puts calls under the ledger, ``requires_approval`` pauses the
    run, ``propagate`` lets a failure end the run.
    """

    __slots__ = ("_call", "_check")

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        call: Callable[[dict[str, Any]], Awaitable[Any]],
        *,
        check: ArgumentCheck | None = None,
        requires_approval: bool = False,
        idempotent: bool = True,
        propagate: bool = False,
    ) -> None:
        async def placeholder() -> None:  # Tool's checks and slots; never called
            return None

        super().__init__(
            placeholder,
            name=name,
            description=description,
            requires_approval=requires_approval,
            idempotent=idempotent,
            propagate=propagate,
        )
        schema = dict(parameters)
        if schema.get("type") != "object":
            raise UserError(f"tool {name!r}: its parameters must be a JSON Schema of type object")
        schema.setdefault("properties", {})
        self.definition = ToolDefinition(name, description, schema, None)
        self._call = call
        self._check = check

    def __repr__(self) -> str:
        return f"SchemaTool({self.name!r})"

    def validate(self, call: ToolCall) -> dict[str, Any]:
        shown = call.arguments if len(call.arguments) <= 200 else call.arguments[:200] + "..."
        try:
            value: object = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            value = None
        if call.truncated or not isinstance(value, dict):
            raise ArgumentsInvalid(
                f"the arguments of {self.name} are not a JSON object: {shown!r}. "
                f"Call {self.name} again with a JSON object matching its schema."
            )
        arguments = cast(dict[str, Any], value)
        problem = self._check(arguments) if self._check is not None else None
        if problem is not None:
            raise ArgumentsInvalid(
                f"invalid arguments for {self.name}: {problem}. Fix them and call the tool again."
            )
        return arguments

    async def invoke(self, ctx: RunContext[Any], kwargs: dict[str, Any]) -> Any:
        return await self._call(kwargs)


def split_tools(tools: Sequence[ToolLike | Toolset]) -> tuple[list[ToolLike], tuple[Toolset, ...]]:
    """``tools`` as (functions and ``Tool`` objects, toolsets)."""
    given = cast(object, tools)
    if isinstance(given, str | bytes) or not isinstance(given, Sequence | set | frozenset):
        return cast(list[ToolLike], tools), ()  # as_tools names the mistake
    static: list[ToolLike] = []
    sets: list[Toolset] = []
    for item in tools:
        if not isinstance(item, Tool) and isinstance(item, Toolset):
            sets.append(item)
        else:
            static.append(cast(ToolLike, item))
    return static, tuple(sets)


async def list_toolsets(toolsets: Sequence[Toolset]) -> list[Tool[Any]]:
    """Every toolset's current tools; a toolset that cannot list them fails the run before any
    model request (``RunError(stage="tools")`` naming it)."""
    out: list[Tool[Any]] = []
    for toolset in toolsets:
        try:
            listed = await toolset.list_tools()
        except RunError:
            raise
        except TetherError as exc:  # names the toolset itself
            raise RunError(f"the tools could not be listed: {exc}", stage="tools") from exc
        except Exception as exc:
            raise RunError(f"{toolset!r} could not list its tools: {exc}", stage="tools") from exc
        out.extend(listed)
    return out
