"""Tools: plain Python functions with a JSON Schema derived from their signature and docstring.

Parameters may be builtins, dataclasses, TypedDicts, msgspec Structs or pydantic models. A first
parameter annotated ``RunContext[...]`` receives the run context and is not part of the schema.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast, overload

import msgspec

from tether.errors import ToolCanceled, UserError
from tether.messages import Document, Image, ResultPart, Text, ToolCall, ToolResult
from tether.models import ToolDefinition

from ._accept import valid_text
from ._context import RunContext
from ._schema import Validator, describe_validation_error, doc_parts, dumps_json, to_jsonable

__all__ = ["ArgumentsInvalid", "Tool", "ToolCanceled", "as_tools", "function_tool", "result_content"]

Deps = TypeVar("Deps")
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class ArgumentsInvalid(Exception):
    """A call's arguments did not validate; ``message`` is written for the model."""


def _is_context(annotation: Any) -> bool:
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


class Tool(Generic[Deps]):
    """A function the model may call.

    - ``requires_approval``: the call is not executed; the run ends with ``result.deferred``.
    - ``external``: the function is never called here; its result comes back through
      ``DeferredResults.results`` (a tool executed by the client).
    - ``idempotent=False``: the tool has side effects; with a store the run records a ledger entry
      before executing it, so a crash never leads to a silent re-execution.
    - ``propagate``: the tool's exceptions end the run (``ToolError``) instead of becoming a
      failed result the model can read.
    - ``in_thread``: run a synchronous function in a worker thread (default) or inline.
    """

    __slots__ = (
        "_call_kwargs",
        "_decoder",
        "_positional",
        "definition",
        "description",
        "external",
        "function",
        "idempotent",
        "in_thread",
        "is_async",
        "name",
        "propagate",
        "requires_approval",
        "takes_context",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        external: bool = False,
        idempotent: bool = True,
        propagate: bool = False,
        in_thread: bool = True,
        strict: bool | None = None,
    ) -> None:
        if not callable(function):
            raise UserError(f"a tool needs a function, got {type(function).__name__}")
        self.function = function
        self.name = name or getattr(function, "__name__", "")
        if not self.name or not set(self.name) <= _NAME_OK or len(self.name) > 64:
            raise UserError(f"tool name {self.name!r} must be 1-64 characters of letters, digits, _ or -")
        if requires_approval and external:
            raise UserError(
                f"tool {self.name!r}: requires_approval and external exclude each other (an external "
                "tool runs outside the run, so the run cannot hold it for approval)"
            )
        self.requires_approval = requires_approval
        self.external = external
        self.idempotent = idempotent
        self.propagate = propagate
        self.in_thread = in_thread
        self.is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )
        summary, param_docs = doc_parts(function)
        self.description = summary if description is None else description
        fields, self.takes_context, self._positional = _signature_fields(function, self.name)
        struct = msgspec.defstruct(f"{self.name}_arguments", fields, kw_only=True, forbid_unknown_fields=True)
        self._call_kwargs = tuple(f[0] for f in fields)
        try:
            validator = Validator(struct)
        except TypeError as exc:
            raise UserError(f"tool {self.name!r}: {exc}") from None
        self._decoder = validator
        parameters = validator.schema
        props: dict[str, Any] = parameters.get("properties", {})
        for pname, text in param_docs.items():
            if pname in props and text and "description" not in props[pname]:
                props[pname] = {**props[pname], "description": text}
        parameters.setdefault("properties", {})
        self.definition = ToolDefinition(self.name, self.description, parameters, strict)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def validate(self, call: ToolCall) -> dict[str, Any]:
        """The keyword arguments for ``call``; ``ArgumentsInvalid`` explains what is wrong."""
        if call.truncated:
            shown = call.arguments if len(call.arguments) <= 200 else call.arguments[:200] + "..."
            raise ArgumentsInvalid(
                f"the arguments are not a complete JSON object (truncated or malformed): {shown!r}. "
                f"Call {self.name} again with a JSON object matching its schema."
            )
        try:
            value = self._decoder.validate_json(call.arguments)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise ArgumentsInvalid(
                f"invalid arguments for {self.name}: {describe_validation_error(exc)}. "
                "Fix them and call the tool again."
            ) from None
        return {k: getattr(value, k) for k in self._call_kwargs}

    async def invoke(self, ctx: RunContext[Any], kwargs: dict[str, Any]) -> Any:
        """Call the function (async directly; sync in a worker thread unless ``in_thread=False``)."""
        args: list[Any] = [ctx] if self.takes_context else []
        if self._positional:
            args.extend(kwargs.pop(p) for p in self._positional)
        if self.is_async:
            return await self.function(*args, **kwargs)
        if not self.in_thread:
            value = self.function(*args, **kwargs)
        else:
            value = await asyncio.to_thread(functools.partial(self.function, *args, **kwargs))
        if inspect.isawaitable(value):
            return await value
        return value


def _signature_fields(
    function: Callable[..., Any], name: str
) -> tuple[list[tuple[str, Any] | tuple[str, Any, Any]], bool, tuple[str, ...]]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise UserError(f"tool {name!r}: cannot read the signature: {exc}") from None
    # a callable object's annotations are those of its __call__
    annotated = (
        function if inspect.isroutine(function) or inspect.isclass(function) else type(function).__call__
    )
    try:
        hints = typing.get_type_hints(annotated, include_extras=True)
    except Exception as exc:
        raise UserError(f"tool {name!r}: cannot resolve the annotations: {exc}") from None
    params = list(signature.parameters.values())
    takes_context = bool(params) and _is_context(hints.get(params[0].name, params[0].annotation))
    if takes_context:
        params = params[1:]
    required: list[tuple[str, Any]] = []
    optional: list[tuple[str, Any, Any]] = []
    positional: list[str] = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise UserError(f"tool {name!r}: *args/**kwargs parameters cannot be described to a model")
        annotation = hints.get(p.name, Any)
        if _is_context(annotation):
            raise UserError(f"tool {name!r}: RunContext must be the first parameter")
        if p.kind is p.POSITIONAL_ONLY:
            positional.append(p.name)
        if p.default is p.empty:
            required.append((p.name, annotation))
        else:
            optional.append((p.name, annotation, p.default))
    return [*required, *optional], takes_context, tuple(positional)


ToolLike = Tool[Any] | Callable[..., Any]


def as_tools(tools: Sequence[ToolLike]) -> dict[str, Tool[Any]]:
    """Wrap plain functions, check that names are unique."""
    given = cast(object, tools)
    if isinstance(given, str | bytes) or not isinstance(given, Sequence | set | frozenset):
        raise UserError(f"tools must be a list of functions or Tool objects, not {type(given).__name__}")
    out: dict[str, Tool[Any]] = {}
    for item in tools:
        t: Tool[Any] = cast(Tool[Any], item) if isinstance(item, Tool) else Tool(item)
        if t.name in out:
            raise UserError(f"two tools are named {t.name!r}; tool names must be unique")
        out[t.name] = t
    return out


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def function_tool(function: Callable[..., Any], /) -> Tool[Any]: ...
@overload
def function_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    external: bool = False,
    idempotent: bool = True,
    propagate: bool = False,
    in_thread: bool = True,
) -> Callable[[Callable[..., Any]], Tool[Any]]: ...
def function_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    external: bool = False,
    idempotent: bool = True,
    propagate: bool = False,
    in_thread: bool = True,
) -> Tool[Any] | Callable[[Callable[..., Any]], Tool[Any]]:
    """Decorator form of ``Tool``: ``@function_tool`` or ``@function_tool(requires_approval=True)``."""

    def make(fn: Callable[..., Any]) -> Tool[Any]:
        return Tool(
            fn,
            name=name,
            description=description,
            requires_approval=requires_approval,
            external=external,
            idempotent=idempotent,
            propagate=propagate,
            in_thread=in_thread,
        )

    return make(function) if function is not None else make


_RESULT_TYPES = (Text, Image, Document)


def result_content(value: Any) -> tuple[tuple[ResultPart, ...], bool]:
    """A tool's return value as result content, and whether it marks a failure.

    ``str`` becomes text; parts pass through; a ``ToolResult`` gives its content and ``failed``
    flag; anything else (dataclass, Struct, pydantic model, dict, list, number, ``None``) is JSON.
    A value holding a lone surrogate half (which JSON cannot carry) is shown with U+FFFD in its
    place; text parts are made valid where the run adds the results (``valid_result``).
    """
    if isinstance(value, str):
        return (Text(value),), False
    if isinstance(value, _RESULT_TYPES):
        return (value,), False
    if isinstance(value, ToolResult):
        return value.content, value.failed
    if isinstance(value, list | tuple):
        items = cast(Sequence[Any], value)
        if items and all(isinstance(v, _RESULT_TYPES) for v in items):
            return tuple(cast(Sequence[ResultPart], items)), False
    try:
        try:
            return (Text(dumps_json(value)),), False
        except UnicodeEncodeError:  # a string inside holds a lone surrogate half
            return (Text(dumps_json(_valid_strings(to_jsonable(value)))),), False
    except (TypeError, NotImplementedError) as exc:
        return (Text(f"the tool returned a value that cannot be shown as JSON: {exc}"),), True


def _valid_strings(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {_valid_strings(k): _valid_strings(v) for k, v in cast(dict[Any, Any], value).items()}
    if isinstance(value, list):
        return [_valid_strings(v) for v in cast(list[Any], value)]
    return value
