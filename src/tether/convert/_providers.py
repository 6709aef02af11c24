"""Provider transcript formats: thin wrappers over the drivers' wire mappings.

``from_<format>`` accepts the message list itself, a whole request body (``messages`` /
``input`` / ``contents``), or its JSON text; either way it passes the input gate
(:mod:`tether.convert._input`: lone surrogates and deep nesting are a ``DecodeError``). A body's
out-of-list system prompt (Responses
``instructions``, Anthropic ``system``, Gemini ``systemInstruction``) becomes a leading ``system``
message. ``to_<format>`` returns the message list; formats whose list has no system role
(Anthropic, Gemini) drop system messages and say so in the report. Exports are built without
the drivers' per-message caches: the caller owns every dict it gets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from tether.convert._input import load_json
from tether.messages import Message, Text
from tether.models.wire import ConversionReport, fail
from tether.models.wire import anthropic as anthropic_wire
from tether.models.wire import gemini as gemini_wire
from tether.models.wire import openai_chat as openai_chat_wire
from tether.models.wire import openai_responses as openai_responses_wire

__all__ = [
    "from_anthropic",
    "from_gemini",
    "from_openai_chat",
    "from_openai_responses",
    "load_json",
    "to_anthropic",
    "to_gemini",
    "to_openai_chat",
    "to_openai_responses",
]


class Decoder(Protocol):
    """A wire module's ``decode_messages``: error paths start at ``path``."""

    def __call__(self, items: object, /, *, path: str = "$") -> tuple[list[Message], ConversionReport]: ...


def _import(
    data: object, key: str, decode: Decoder, system: Callable[[Mapping[str, Any]], str | None]
) -> tuple[list[Message], ConversionReport]:
    data = load_json(data)
    if not isinstance(data, Mapping):
        return decode(data)
    body = cast(Mapping[str, Any], data)
    if key not in body:
        raise fail(f"a request body needs {key!r}", f"$.{key}")
    messages, report = decode(body[key], path=f"$.{key}")
    prompt = system(body)
    if prompt is not None:
        messages.insert(0, Message("system", (Text(prompt),)))
    return messages, report


def _text_prompt(value: object, path: str) -> str | None:
    """A system prompt given as a string or as a list of ``{"text": …}`` blocks."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for i, block in enumerate(cast(list[Any], value)):
            text = cast(Mapping[str, Any], block).get("text") if isinstance(block, Mapping) else None
            if not isinstance(text, str):
                raise fail("system block needs a 'text' string", f"{path}[{i}]")
            texts.append(text)
        return "\n\n".join(texts)
    raise fail("system prompt must be a string or a list of text blocks", path)


# -- OpenAI Chat Completions --------------------------------------------------------------------


def from_openai_chat(data: object) -> tuple[list[Message], ConversionReport]:
    """A Chat Completions ``messages`` list (or request body) → messages. System and developer
    entries are already in the list and stay in place."""
    return _import(data, "messages", openai_chat_wire.decode_messages, lambda _body: None)


def to_openai_chat(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Messages → a Chat Completions ``messages`` list (reasoning has no place there: reported)."""
    return openai_chat_wire.encode_messages(messages)


# -- OpenAI Responses ---------------------------------------------------------------------------


def _responses_input(data: object, *, path: str = "$") -> tuple[list[Message], ConversionReport]:
    if isinstance(data, str):  # `input` may be a bare string: one user message
        return [Message("user", (Text(data),))], ConversionReport()
    return openai_responses_wire.decode_messages(data, path=path)


def from_openai_responses(data: object) -> tuple[list[Message], ConversionReport]:
    """Responses ``input`` items (or a request body) → messages. A body's ``instructions``
    becomes a leading system message."""
    return _import(
        data, "input", _responses_input, lambda body: _text_prompt(body.get("instructions"), "$.instructions")
    )


def to_openai_responses(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Messages → Responses ``input`` items (system messages stay as ``system`` items)."""
    return openai_responses_wire.encode_messages(messages)


# -- Anthropic ----------------------------------------------------------------------------------


def from_anthropic(data: object) -> tuple[list[Message], ConversionReport]:
    """An Anthropic ``messages`` list (or request body) → messages. A body's ``system`` (string
    or text blocks) becomes a leading system message."""
    return _import(
        data,
        "messages",
        anthropic_wire.decode_messages,
        lambda body: _text_prompt(body.get("system"), "$.system"),
    )


def to_anthropic(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Messages → an Anthropic ``messages`` list. System messages are dropped and reported (the
    API takes them as the separate ``system`` field)."""
    return anthropic_wire.encode_messages(messages)


# -- Gemini -------------------------------------------------------------------------------------


def _gemini_system(body: Mapping[str, Any]) -> str | None:
    key = "systemInstruction" if "systemInstruction" in body else "system_instruction"
    value = body.get(key)
    if isinstance(value, Mapping):
        return _text_prompt(cast(Mapping[str, Any], value).get("parts"), f"$.{key}.parts")
    return _text_prompt(value, f"$.{key}")


def from_gemini(data: object) -> tuple[list[Message], ConversionReport]:
    """A Gemini ``contents`` list (or request body) → messages. A body's ``systemInstruction``
    becomes a leading system message."""
    return _import(data, "contents", gemini_wire.decode_messages, _gemini_system)


def to_gemini(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Messages → Gemini ``contents``. System messages are dropped and reported (the API takes
    them as ``systemInstruction``)."""
    return gemini_wire.encode_messages(messages)
