"""JSON Schema and validation for Python types: tool parameters and structured output.

msgspec derives the schema and validates (dataclasses, TypedDicts, msgspec Structs, attrs,
builtins). pydantic models are handled through hooks, without importing pydantic: a class with
``model_json_schema`` and ``model_validate`` is treated as a pydantic model.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, cast

import msgspec
import msgspec.inspect as mi

__all__ = [
    "Validator",
    "describe_validation_error",
    "doc_parts",
    "is_pydantic_model",
    "to_jsonable",
]


def is_pydantic_model(tp: object) -> bool:
    """True for a pydantic ``BaseModel`` subclass (duck-typed: pydantic is optional)."""
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and hasattr(tp, "model_validate")


class _Hooks:
    """msgspec hooks for pydantic models, collecting their ``$defs`` while building a schema."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def schema_hook(self, tp: type) -> dict[str, Any]:
        if is_pydantic_model(tp):
            schema = dict(cast(Any, tp).model_json_schema())
            self.defs.update(schema.pop("$defs", {}))
            return schema
        raise NotImplementedError  # msgspec's hook protocol: "not a type this hook handles"

    @staticmethod
    def dec_hook(tp: type, obj: Any) -> Any:
        if is_pydantic_model(tp):
            return cast(Any, tp).model_validate(obj)
        raise NotImplementedError  # msgspec's hook protocol: it reports the type as unsupported


def _enc_hook(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    # msgspec's hook protocol: NotImplementedError marks a value no hook can encode
    raise NotImplementedError(f"cannot encode {type(obj).__name__} as JSON")


def to_jsonable(value: Any) -> Any:
    """A value (dataclass, Struct, pydantic model, builtins) as plain JSON-compatible data."""
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


_json_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def dumps_json(value: Any) -> str:
    """A value as JSON text (pydantic models through ``model_dump``)."""
    return _json_encoder.encode(value).decode()


class Validator:
    """Validates a JSON object against one type and produces that type's JSON Schema.

    ``tp`` is any type msgspec understands, or a pydantic model. ``schema`` is an inline object
    schema (``$defs`` at its top when needed), without titles on the root.
    """

    __slots__ = ("_decoder", "schema", "type")

    def __init__(self, tp: Any) -> None:
        self.type = tp
        hooks = _Hooks()
        try:
            (ref,), components = msgspec.json.schema_components(
                [tp], schema_hook=hooks.schema_hook, ref_template="#/$defs/{name}"
            )
        except (TypeError, ValueError) as exc:
            raise TypeError(f"cannot derive a JSON Schema for {tp!r}: {exc}") from None
        components.update(hooks.defs)
        schema = dict(ref)
        _add_time_formats(mi.type_info(tp), schema, components, set())
        name = _ref_name(schema)
        if name is not None:
            schema = dict(components.pop(name))
        schema.pop("title", None)
        if components:
            schema["$defs"] = components
        self.schema: dict[str, Any] = schema
        self._decoder = msgspec.json.Decoder(tp, dec_hook=hooks.dec_hook)

    def validate_python(self, obj: Any) -> Any:
        """Convert already-parsed JSON data to the type; raises ``msgspec.ValidationError``."""
        return msgspec.convert(obj, self.type, dec_hook=_Hooks.dec_hook)

    def validate_json(self, text: str | bytes) -> Any:
        """Parse and convert JSON text; raises ``msgspec.ValidationError`` or ``DecodeError``."""
        return self._decoder.decode(text)


def _add_time_formats(t: mi.Type, schema: dict[str, Any], defs: dict[str, Any], seen: set[str]) -> None:
    """Announce ``format`` on datetime and time fields that accept an offset.

    msgspec leaves ``datetime`` and ``time`` without a ``format`` unless they are declared
    timezone-aware, so the model is told only "a string". They accept RFC 3339 text with an
    offset, so ``date-time``/``time`` is added (a narrowing the validator accepts). Walks the
    type and its schema side by side; parts it cannot line up are left as they are.
    """
    while isinstance(t, mi.Metadata):
        t = t.type
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        if name in seen or not isinstance(target, dict):
            return
        seen.add(name)
        schema = cast(dict[str, Any], target)
    if isinstance(t, mi.DateTimeType | mi.TimeType):
        if t.tz is not False and schema.get("type") == "string":
            schema.setdefault("format", "date-time" if isinstance(t, mi.DateTimeType) else "time")
    elif isinstance(t, mi.StructType | mi.DataclassType | mi.TypedDictType | mi.NamedTupleType):
        array_like = isinstance(t, mi.NamedTupleType) or (isinstance(t, mi.StructType) and t.array_like)
        if array_like:
            items = cast(list[dict[str, Any]], schema.get("prefixItems") or [])
            for field, sub in zip(t.fields, items, strict=False):
                _add_time_formats(field.type, sub, defs, seen)
        else:
            props = cast(dict[str, dict[str, Any]], schema.get("properties") or {})
            for field in t.fields:
                sub = props.get(field.encode_name)
                if sub is not None:
                    _add_time_formats(field.type, sub, defs, seen)
    elif isinstance(t, mi.CollectionType):
        items = schema.get("items")
        if isinstance(items, dict):
            _add_time_formats(t.item_type, cast(dict[str, Any], items), defs, seen)
    elif isinstance(t, mi.TupleType):
        items = cast(list[dict[str, Any]], schema.get("prefixItems") or [])
        for sub_type, sub in zip(t.item_types, items, strict=False):
            _add_time_formats(sub_type, sub, defs, seen)
    elif isinstance(t, mi.DictType):
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            _add_time_formats(t.value_type, cast(dict[str, Any], values), defs, seen)
    elif isinstance(t, mi.UnionType):
        _union_time_formats(t, schema, defs, seen)


def _union_time_formats(
    t: mi.UnionType, schema: dict[str, Any], defs: dict[str, Any], seen: set[str]
) -> None:
    """msgspec lists a union's non-struct members first, in order; structs are found by title."""
    options = cast(list[dict[str, Any]], schema.get("anyOf") or [])
    others: list[mi.Type] = []
    for sub in t.types:
        real = sub
        while isinstance(real, mi.Metadata):
            real = real.type
        if isinstance(real, mi.NoneType):
            continue
        if isinstance(real, mi.StructType) and not real.array_like:
            for name, component in defs.items():
                if (
                    isinstance(component, dict)
                    and cast(dict[str, Any], component).get("title") == real.cls.__name__
                ):
                    _add_time_formats(real, {"$ref": f"#/$defs/{name}"}, defs, seen)
            continue
        others.append(sub)
    for sub, option in zip(others, options, strict=False):
        _add_time_formats(sub, option, defs, seen)


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 1:
        return ref[len("#/$defs/") :]
    return None


def describe_validation_error(exc: BaseException) -> str:
    """A short, model-readable explanation of a validation failure."""
    text = str(exc).strip()
    return text or type(exc).__name__


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_WORDS = frozenset({"args", "arguments", "parameters", "params"})
_GOOGLE_ARG = re.compile(r"^\s+\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ARG = re.compile(r"^(\w+)\s*(?::.*)?$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_NUMPY_RULE = re.compile(r"^-{3,}\s*$")


def doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(summary, parameter descriptions) from a Google, Sphinx or NumPy style docstring."""
    lines = (inspect.getdoc(fn) or "").splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    style = ""  # "" summary, "google"/"numpy"/"sphinx" inside parameters, "other" elsewhere
    current = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        section = _SECTION.match(line)
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            style, current = "sphinx", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif line.startswith(":"):
            style, current = "other", ""
        elif line.strip() and _NUMPY_RULE.match(nxt):
            style = "numpy" if line.strip().lower() in _ARG_WORDS else "other"
            current = ""
            i += 1
        elif section:
            style = "google" if section.group(1).lower() in _ARG_WORDS else "other"
            current = ""
        elif not style:
            summary.append(line)
        elif style in ("google", "numpy"):
            head = _GOOGLE_ARG.match(line) if style == "google" else _NUMPY_ARG.match(line)
            indent = len(line) - len(line.lstrip())
            if head and (style == "numpy" or indent <= 4):
                current = head.group(1)
                params[current] = head.group(2).strip() if style == "google" else ""
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif style == "sphinx" and current and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
        i += 1
    return "\n".join(summary).strip(), params
