"""OpenAI Responses decoding: ``input`` items and response bodies to tether messages (the streaming
accumulator is ``_openai_responses_stream``). The mapping is described in
``tether.models.wire.openai_responses``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from tether.messages import Document, Image, Message, Part, Reasoning, Role, Text, ToolCall, ToolResult, Usage
from tether.models._base import ModelResponse
from tether.models.wire._common import ConversionReport, Loss
from tether.models.wire._json import b64decode, fail, obj, opt_obj, opt_str, seq, string, token_count

__all__ = ["PROVIDER", "decode_messages", "decode_response"]

PROVIDER = "openai"
"""The provider stamped on messages and reasoning parts decoded from the Responses API."""

Item = dict[str, Any]


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------


class _Importer:
    """Turns a sequence of items into messages, grouping assistant-side items into one message."""

    def __init__(self, report: ConversionReport, *, native: bool) -> None:
        self.report = report
        self.native = native  # decoding a response (positions are output indexes)
        self.messages: list[Message] = []
        self.parts: list[Part] = []
        self.role: str | None = None
        self.last_was_message = False
        self.call_names: dict[str, str] = {}

    def flush(self) -> None:
        if self.role is not None:
            self.messages.append(Message(cast(Role, self.role), tuple(self.parts)))
        self.role = None
        self.parts = []
        self.last_was_message = False

    def open(self, role: str) -> None:
        if self.role != role:
            self.flush()
            self.role = role

    def item(self, raw: object, ii: int, path: str) -> None:
        item = obj(raw, path)
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"
        if not isinstance(kind, str):
            raise fail("item has no 'type' (and no 'role')", f"{path}.type")
        if kind == "message":
            self._message(item, ii, path)
            return
        if kind == "reasoning":
            self.open("assistant")
            self.parts.extend(self._reasoning(item, ii, path))
        elif kind == "function_call":
            self.open("assistant")
            call_id = string(item, "call_id", path)
            name = string(item, "name", path)
            arguments = string(item, "arguments", path)
            if self.native and not arguments.strip():
                arguments = "{}"  # a response's call to a tool without parameters: no arguments
            self.call_names[call_id] = name
            self.parts.append(ToolCall(call_id, name, arguments, provider_id=opt_str(item, "id", path)))
        elif kind == "function_call_output":
            self.open("tool")
            call_id = string(item, "call_id", path)
            name = self.call_names.get(call_id)
            if name is None:
                name = ""
                self.report.approximate(ii, None, "tool name", f"no function_call with call_id {call_id!r}")
            content = self._output(item.get("output"), ii, f"{path}.output")
            self.parts.append(ToolResult(call_id, name, content))
        else:
            self.report.drop(ii, None, f"{kind} item", "a provider-native item with no tether equivalent")
            return
        self.last_was_message = False

    def _message(self, item: Mapping[str, Any], ii: int, path: str) -> None:
        role = string(item, "role", path)
        raw = item.get("content")
        if role == "assistant":
            item_id = opt_str(item, "id", path)
            split = self.last_was_message and item_id is None and not self.native
            if self.role != "assistant" or split:
                self.flush()
                self.role = "assistant"
            if "phase" in item and item["phase"] is not None and not self.native:
                self.report.drop(ii, None, "message phase", "tether messages have no phase")
            texts = self._output_texts(raw, ii, f"{path}.content")
            if item_id is not None:
                if texts:
                    texts[0] = Text(texts[0].text, provider_id=item_id)
                elif not self.native:
                    self.report.drop(ii, None, "message item id", "the message item has no text to hold it")
            self.parts.extend(texts)
            self.last_was_message = True
            return
        if role == "developer":
            self.report.approximate(ii, None, "developer role", "imported as a system message")
            role = "system"
        if role not in ("user", "system"):
            raise fail(f"unknown message role {role!r}", f"{path}.role")
        self.flush()
        if isinstance(raw, str):
            parts: list[Part] = [Text(raw)]
        else:
            parts = list(self._input_parts(raw, ii, f"{path}.content", system=role == "system"))
        self.messages.append(Message(cast(Role, role), tuple(parts)))

    def _output_texts(self, raw: object, ii: int, path: str) -> list[Text]:
        if isinstance(raw, str):
            return [Text(raw)]
        texts: list[Text] = []
        for ci, entry_raw in enumerate(seq(raw, path)):
            epath = f"{path}[{ci}]"
            entry = obj(entry_raw, epath)
            kind = string(entry, "type", epath)
            if kind in ("output_text", "input_text", "text"):
                texts.append(Text(string(entry, "text", epath)))
                if entry.get("annotations"):
                    self.report.drop(ii, ci, "text annotations", "tether text has no annotations")
            elif kind == "refusal":
                texts.append(Text(string(entry, "refusal", epath)))
                self.report.approximate(ii, ci, "refusal", "imported as text")
            else:
                raise fail(f"unknown assistant content type {kind!r}", f"{epath}.type")
        return texts

    def _input_parts(
        self, raw: object, ii: int, path: str, *, system: bool = False
    ) -> list[Text | Image | Document]:
        out: list[Text | Image | Document] = []
        for ci, entry_raw in enumerate(seq(raw, path)):
            epath = f"{path}[{ci}]"
            entry = obj(entry_raw, epath)
            kind = string(entry, "type", epath)
            if kind in ("input_text", "output_text", "text"):
                out.append(Text(string(entry, "text", epath)))
            elif kind == "input_image" and not system:
                out.append(self._image(entry, ii, ci, epath))
            elif kind == "input_file" and not system:
                out.append(self._file(entry, ii, ci, epath))
            else:
                raise fail(f"unsupported content type {kind!r}", f"{epath}.type")
        return out

    def _image(self, entry: Mapping[str, Any], ii: int, ci: int, path: str) -> Image:
        url = opt_str(entry, "image_url", path)
        if url is None:
            if entry.get("file_id") is not None:
                raise fail("images by file_id cannot be imported (no content)", f"{path}.file_id")
            raise fail("'image_url' must be a string (missing)", f"{path}.image_url")
        detail = entry.get("detail")
        if detail not in (None, "auto"):
            self.report.approximate(ii, ci, "image detail", f"detail {detail!r} is not kept; sent as 'auto'")
        if url.startswith("data:"):
            media_type, data = _parse_data_url(url, f"{path}.image_url")
            return Image(data=data, media_type=media_type)
        return Image(url=url)

    def _file(self, entry: Mapping[str, Any], ii: int, ci: int, path: str) -> Document:
        filename = opt_str(entry, "filename", path)
        file_url = opt_str(entry, "file_url", path)
        file_data = opt_str(entry, "file_data", path)
        if file_url is not None:
            return Document(url=file_url, title=filename)
        if file_data is not None:
            if file_data.startswith("data:"):
                media_type, data = _parse_data_url(file_data, f"{path}.file_data")
            else:
                media_type, data = "application/pdf", b64decode(file_data, f"{path}.file_data")
                self.report.approximate(ii, ci, "file media type", "bare base64 file data assumed PDF")
            return Document(data=data, media_type=media_type, title=filename)
        raise fail("input_file needs file_url or file_data (file_id cannot be imported)", path)

    def _output(self, raw: object, ii: int, path: str) -> tuple[Text | Image | Document, ...]:
        if isinstance(raw, str):
            return (Text(raw),)
        return tuple(self._input_parts(raw, ii, path))

    def _reasoning(self, item: Mapping[str, Any], ii: int, path: str) -> list[Reasoning]:
        """One part per ``summary`` entry, then one per raw ``content`` entry (the reasoning text
        Responses-compatible servers such as vLLM return for open-weight models); no text at all
        gives one empty part. The first part carries ``encrypted_content``."""
        item_id = string(item, "id", path)
        signature = opt_str(item, "encrypted_content", path)
        texts: list[str] = []
        for si, entry_raw in enumerate(seq(item.get("summary") or [], f"{path}.summary")):
            epath = f"{path}.summary[{si}]"
            texts.append(string(obj(entry_raw, epath), "text", epath))
        raw = item.get("content")
        if raw is not None:
            entries = seq(raw, f"{path}.content")
            for ci, entry_raw in enumerate(entries):
                epath = f"{path}.content[{ci}]"
                texts.append(string(obj(entry_raw, epath), "text", epath))
            if entries and not self.native:
                self.report.approximate(
                    ii, None, "reasoning content", "raw reasoning text kept as reasoning (summary on export)"
                )
        if not texts:
            texts = [""]
        return [
            Reasoning(text, signature=signature if i == 0 else None, provider=PROVIDER, provider_id=item_id)
            for i, text in enumerate(texts)
        ]


def _parse_data_url(url: str, path: str) -> tuple[str, bytes]:
    head, sep, payload = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise fail("data URL must be 'data:<media type>;base64,<data>'", path)
    media_type = head[len("data:") : -len(";base64")]
    if not media_type:
        raise fail("data URL has no media type", path)
    return media_type, b64decode(payload, path)


def decode_messages(items: object, *, path: str = "$") -> tuple[list[Message], ConversionReport]:
    """Responses ``input`` items → messages. Malformed input raises ``DecodeError`` with a JSON
    path such as ``$[3].content[1].image_url``, starting at ``path`` (where ``items`` sits in a
    larger document, e.g. ``$.input``)."""
    report = ConversionReport()
    importer = _Importer(report, native=False)
    for ii, raw in enumerate(seq(items, path)):
        importer.item(raw, ii, f"{path}[{ii}]")
    importer.flush()
    return importer.messages, report


# --------------------------------------------------------------------------------------------
# responses
# --------------------------------------------------------------------------------------------


def _usage(raw: object) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage()
    usage = cast(Mapping[str, Any], raw)
    inp = opt_obj(usage.get("input_tokens_details"))
    out = opt_obj(usage.get("output_tokens_details"))
    return Usage(
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        cache_read_tokens=token_count(inp.get("cached_tokens")),
        reasoning_tokens=token_count(out.get("reasoning_tokens")),
    )


def _stop_reason(body: Mapping[str, Any], message: Message, *, refused: bool) -> str:
    """``status`` (and ``incomplete_details``) → a normalized stop reason. A completed answer
    holding a ``refusal`` content is a ``content_filter`` stop, as on OpenAI Chat, so a refusal
    (imported as text) is never taken for an answer."""
    status = body.get("status")
    if status == "incomplete":
        details = cast(Mapping[str, Any], body.get("incomplete_details") or {})
        reason = details.get("reason")
        if reason == "max_output_tokens":
            return "length"
        if reason == "content_filter":
            return "content_filter"
        return str(reason or "incomplete")
    if status == "failed":
        return "error"
    if message.tool_calls:
        return "tool_calls"
    return "content_filter" if refused else "stop"


def decode_response(body: object, *, report: ConversionReport | None = None) -> ModelResponse:
    """A Responses API response body → ``ModelResponse``. Provider-native items (web search,
    MCP, code interpreter, …) and ``annotations`` on output text have no tether equivalent: they
    are left out and, given a ``report``, listed there (message 0, part = output index), as is a
    refusal kept as text."""
    response = obj(body, "$")
    importer = _Importer(ConversionReport(), native=True)
    importer.role = "assistant"
    for oi, raw in enumerate(seq(response.get("output", []), "$.output")):
        importer.item(raw, oi, f"$.output[{oi}]")
        if importer.role != "assistant":
            raise fail("a response output holds only assistant items", f"$.output[{oi}]")
    parts = tuple(importer.parts)
    usage = _usage(response.get("usage"))
    draft = Message("assistant", parts)
    refused = any(loss.what == "refusal" for loss in importer.report.losses)
    if report is not None:  # the importer counts items as messages: here they are the parts
        for loss in importer.report.losses:
            report.losses.append(Loss(0, loss.message, loss.kind, loss.what, loss.reason))
    stop = _stop_reason(response, draft, refused=refused)
    message = Message(
        "assistant",
        parts,
        provider=PROVIDER,
        model=opt_str(response, "model", "$"),
        stop_reason=stop,
        usage=usage,
        response_id=opt_str(response, "id", "$"),
    )
    return ModelResponse(message, stop, usage)
