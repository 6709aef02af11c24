"""Import and export: provider transcripts and peer libraries' formats to and from tether messages.

Every format has ``from_<format>(data) -> (messages, report)`` and
``to_<format>(messages) -> (data, report)``; the ``ConversionReport`` lists, per message and part
index, what was dropped or approximated — nothing is lost silently. Formats:

================== =====================================================================
``openai_chat``     Chat Completions ``messages`` (or a request body)
``openai_responses`` Responses ``input`` items (or a request body with ``instructions``)
``anthropic``       Anthropic ``messages`` (or a request body with ``system``)
``gemini``          Gemini ``contents`` (or a request body with ``systemInstruction``)
``pydantic_ai``     pydantic-ai ``ModelMessagesTypeAdapter`` JSON
``openai_agents``   OpenAI Agents SDK session items
``langchain``       LangChain ``messages_to_dict`` output
``tether``          the tether JSON contract itself (``tether.dumps``)
================== =====================================================================

Provider formats share the drivers' wire mappings (``tether.models.wire``). ``from_*`` accepts
parsed JSON or JSON text; malformed input raises ``DecodeError`` with the JSON path of the
offending element, and so do strings holding lone surrogates, numbers JSON cannot carry (``inf``,
``nan``, integers no decoder reads back) and nesting deeper than ``MAX_DEPTH`` levels, never a
bare ``UnicodeEncodeError``, ``ValueError`` or ``RecursionError``.
:func:`convert` goes from any format to any other (the CLI's ``tether history convert``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from tether.convert._input import MAX_DEPTH, check_text, explain_text, load_json
from tether.convert._langchain import from_langchain, to_langchain
from tether.convert._openai_agents import from_openai_agents, to_openai_agents
from tether.convert._providers import (
    from_anthropic,
    from_gemini,
    from_openai_chat,
    from_openai_responses,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from tether.convert._pydantic_ai import from_pydantic_ai, to_pydantic_ai
from tether.errors import DecodeError, UserError
from tether.messages import Message, dumps, loads
from tether.models.wire import ConversionReport, Loss

__all__ = [
    "FORMATS",
    "MAX_DEPTH",
    "ConversionReport",
    "Format",
    "Loss",
    "convert",
    "from_anthropic",
    "from_gemini",
    "from_langchain",
    "from_openai_agents",
    "from_openai_chat",
    "from_openai_responses",
    "from_pydantic_ai",
    "from_tether",
    "to_anthropic",
    "to_gemini",
    "to_langchain",
    "to_openai_agents",
    "to_openai_chat",
    "to_openai_responses",
    "to_pydantic_ai",
    "to_tether",
]


def from_tether(data: object) -> tuple[list[Message], ConversionReport]:
    """The tether JSON contract (text, or an already-parsed list) → messages, losslessly."""
    if isinstance(data, str):
        check_text(data)
    elif not isinstance(data, bytes | bytearray):
        try:
            data = msgspec.json.encode(load_json(data))
        except TypeError as exc:  # a Python value JSON has no form for
            raise DecodeError(f"not JSON: {exc}", path="$") from None
    try:
        return loads(data), ConversionReport()
    except DecodeError:
        explain_text(data)  # a lone surrogate escape gets its JSON path
        raise


def to_tether(messages: Sequence[Message]) -> tuple[list[Any], ConversionReport]:
    """Messages → the tether JSON contract as parsed JSON (``tether.dumps`` gives the text)."""
    return msgspec.json.decode(dumps(messages)), ConversionReport()


@dataclass(frozen=True, slots=True)
class Format:
    """One conversion format: its name, its two functions and a one-line description."""

    name: str
    load: Callable[[object], tuple[list[Message], ConversionReport]]
    dump: Callable[[Sequence[Message]], tuple[Any, ConversionReport]]
    description: str


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("tether", from_tether, to_tether, "the tether JSON contract"),
        Format("openai_chat", from_openai_chat, to_openai_chat, "OpenAI Chat Completions messages"),
        Format(
            "openai_responses", from_openai_responses, to_openai_responses, "OpenAI Responses input items"
        ),
        Format("anthropic", from_anthropic, to_anthropic, "Anthropic Messages messages"),
        Format("gemini", from_gemini, to_gemini, "Google Gemini contents"),
        Format("pydantic_ai", from_pydantic_ai, to_pydantic_ai, "pydantic-ai ModelMessagesTypeAdapter JSON"),
        Format("openai_agents", from_openai_agents, to_openai_agents, "OpenAI Agents SDK session items"),
        Format("langchain", from_langchain, to_langchain, "LangChain messages_to_dict output"),
    )
}
"""Every format by name (``-`` may be written for ``_``: ``openai-chat``)."""


def _format(name: str) -> Format:
    found = FORMATS.get(name.replace("-", "_"))
    if found is None:
        raise UserError(f"unknown format {name!r}; expected one of {', '.join(FORMATS)}")
    return found


def convert(data: object, *, from_: str, to: str) -> tuple[Any, ConversionReport]:
    """Convert ``data`` from one format to another through tether messages.

    The report holds the import's losses (indices into the source) followed by the export's
    (indices into the intermediate tether messages).
    """
    messages, imported = _format(from_).load(data)
    out, exported = _format(to).dump(messages)
    return out, ConversionReport([*imported.losses, *exported.losses])
