"""What every driver shares through ``Driver``: closing (``aclose`` / ``async with``, only what the
driver created), the generate/stream skeleton, per-driver memos (no process-wide caches), and
the published token limits on its profile.

Closing is checked from the other end of a real connection: a loopback HTTP/1.1 server answers
with recorded provider bodies and counts the keep-alive connections the SDK clients open and
close."""

from __future__ import annotations

import gc
import importlib
import inspect
import subprocess
import sys
import textwrap
import types
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
import yaml
from google import genai

from tether import Message, Text, UserError, assistant, user
from tether.models import Model, Profile, infer_model
from tether.models._base import aclose_model, with_limits
from tether.models._driver import Driver
from tether.models.anthropic import AnthropicModel
from tether.models.gemini import GeminiModel
from tether.models.openai_chat import OpenAIChatModel
from tether.models.openai_responses import OpenAIResponsesModel
from tether.models.testing import FunctionModel, TestModel
from tether.models.wire._memo import MessageTable, PerMessageCache

from ._loopback import loopback

CLAUDE = "claude-sonnet-4-6"


def _recorded(samples: Path, folder: str, name: str, index: int = 0) -> dict[str, Any]:
    interactions = yaml.safe_load((samples / folder / name).read_text())["interactions"]
    body: dict[str, Any] = interactions[index]["response"]["parsed_body"]
    return body


def _bodies(samples: Path) -> Callable[[str], dict[str, Any]]:
    chat = _recorded(samples, "openai-chat", "test_compatible_api_with_tool_calls_without_id.yaml")
    responses = _recorded(samples, "openai-responses", "test_openai_responses_model_instructions.yaml")
    messages = _recorded(samples, "anthropic", "test_anthropic_tool_with_thinking.yaml")
    gemini = _recorded(samples, "gemini", "test_google_model_top_p.yaml")

    def body(path: str) -> dict[str, Any]:
        if path.endswith("/chat/completions"):
            return chat
        if path.endswith("/responses"):
            return responses
        if path.endswith("/messages"):
            return messages
        return gemini

    return body


def _own_client_drivers(url: str) -> list[Driver]:
    """One driver per provider, each creating its own SDK client (pointed at the loopback)."""
    return [
        OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="k"),
        OpenAIResponsesModel("gpt-4o", base_url=f"{url}/v1", api_key="k"),
        AnthropicModel(CLAUDE, base_url=url, api_key="k"),
        GeminiModel("gemini-1.5-flash", api_key="k", http_options={"base_url": url}),
    ]


@pytest.mark.parametrize("index", range(4), ids=["openai", "openai-responses", "anthropic", "google"])
async def test_aclose_closes_the_client_the_driver_created(provider_samples: Path, index: int) -> None:
    with loopback(_bodies(provider_samples)) as server:
        driver = _own_client_drivers(server.url)[index]
        response = await driver.generate([user("hi")])
        assert response.message.parts
        assert server.open_connections == 1  # keep-alive: the SDK client holds it
        await driver.aclose()
        assert server.wait_closed(), "the driver's own HTTP connection stayed open"
        await driver.aclose()  # idempotent
        # a closed driver opens a new client on its next request
        again = await driver.generate([user("hi")])
        assert again.message == response.message
        async with driver as same:
            assert same is driver
        assert server.wait_closed()
        assert server.opened == 2


@pytest.mark.parametrize("index", range(4), ids=["openai", "openai-responses", "anthropic", "google"])
async def test_a_client_passed_in_stays_open(provider_samples: Path, index: int) -> None:
    with loopback(_bodies(provider_samples)) as server:
        url = server.url
        http1 = httpx2.AsyncClient()  # the openai and anthropic SDKs' HTTP client type
        http0 = httpx.AsyncClient()  # google-genai's
        if index == 0:
            sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", http_client=http1)
            driver: Driver = OpenAIChatModel("gpt-4o", client=sdk)
        elif index == 1:
            driver = OpenAIResponsesModel("gpt-4o", base_url=f"{url}/v1", api_key="k", http_client=http1)
        elif index == 2:
            driver = AnthropicModel(CLAUDE, base_url=url, api_key="k", http_client=http1)
        else:
            options = {"base_url": url, "httpx_async_client": http0}
            driver = GeminiModel("gemini-1.5-flash", client=genai.Client(api_key="k", http_options=options))
        http = http0 if index == 3 else http1
        async with driver:
            await driver.generate([user("hi")])
        assert not http.is_closed
        assert server.open_connections == 1
        assert not server.wait_closed(timeout=0.3)  # the caller's connection is still there
        await driver.generate([user("still usable")])
        assert server.opened == 1  # the same connection served both
        await http1.aclose()
        await http0.aclose()
        assert server.wait_closed()


def test_closing_before_exit_leaves_stderr_clean(provider_samples: Path, tmp_path: Path) -> None:
    """A program that closes its drivers exits without the HTTP clients' shutdown complaints
    ("Task exception was never retrieved … Event loop is closed")."""
    with loopback(_bodies(provider_samples)) as server:
        script = tmp_path / "program.py"
        script.write_text(
            textwrap.dedent(
                f"""
                import asyncio, gc
                from tether import user
                from tether.models.anthropic import AnthropicModel
                from tether.models.gemini import GeminiModel
                from tether.models.openai_chat import OpenAIChatModel

                async def main():
                    drivers = [
                        OpenAIChatModel("gpt-4o", base_url="{server.url}/v1", api_key="k"),
                        AnthropicModel("{CLAUDE}", base_url="{server.url}", api_key="k"),
                        GeminiModel(
                            "gemini-1.5-flash", api_key="k", http_options={{"base_url": "{server.url}"}}
                        ),
                    ]
                    for driver in drivers:
                        async with driver:
                            await driver.generate([user("hi")])
                    return drivers

                drivers = asyncio.run(main())
                del drivers
                gc.collect()
                print("done")
                """
            )
        )
        src = Path(__file__).resolve().parents[2] / "src"
        done = subprocess.run(
            [sys.executable, "-W", "error::ResourceWarning", str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "done"
        assert "Event loop is closed" not in done.stderr
        assert "Task exception was never retrieved" not in done.stderr
        assert server.wait_closed()


async def test_every_model_can_be_closed_the_same_way() -> None:
    """The offline models have the lifecycle too (a no-op), and ``aclose_model`` closes any model,
    including one written before ``aclose`` was documented (it still satisfies ``Model``)."""

    class OldModel:
        @property
        def name(self) -> str:
            return "old"

        @property
        def profile(self) -> Profile:
            return Profile("old")

        async def generate(self, messages: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        def stream(self, messages: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    old = OldModel()
    assert isinstance(old, Model)
    await aclose_model(old)
    for model in (FunctionModel(lambda m, i: "x"), TestModel()):
        assert isinstance(model, Model)
        async with model as same:
            assert same is model
        await model.aclose()
        await aclose_model(model)
        assert (await model.generate([user("q")])).message.text


async def test_a_subclass_releases_its_own_resources_through_the_hook() -> None:
    """``LocalModel`` (and any driver) inherits ``aclose``/``async with`` and overrides
    ``_release`` for what it holds itself; ``aclose`` calls it even when there is no client."""
    released: list[str] = []

    class Holder(OpenAIChatModel):
        async def _release(self) -> None:
            released.append("weights")

    async with Holder("gpt-4o", api_key="k"):
        pass
    assert released == ["weights"]
    local = importlib.import_module("tether.models.local").LocalModel
    assert issubclass(local, Driver)
    assert local.aclose is Driver.aclose
    assert local.__aenter__ is Driver.__aenter__


# -- the skeleton lives once, in Driver ------------------------------------------------------------


@pytest.mark.parametrize("cls", [OpenAIChatModel, OpenAIResponsesModel, AnthropicModel, GeminiModel])
def test_generate_and_stream_are_the_shared_template(cls: type[Driver]) -> None:
    assert cls.generate is Driver.generate
    assert cls.stream is Driver.stream
    assert "_error" in vars(cls)  # what differs stays in the driver
    assert "_send" in vars(cls)
    assert "_open_stream" in vars(cls)
    source = inspect.getsource(importlib.import_module(cls.__module__))
    assert "async def generate" not in source
    assert "async def stream" not in source


# -- memos belong to a driver ----------------------------------------------------------------------

_MUTABLE = (
    dict,
    list,
    set,
    bytearray,
    weakref.WeakKeyDictionary,
    weakref.WeakValueDictionary,
    PerMessageCache,
    MessageTable,
)


def test_no_module_of_models_holds_a_mutable_cache() -> None:
    """Every module-level value under ``tether.models`` is immutable (tuples, frozensets, read-only
    mappings, frozen dataclasses, classes, functions): caches live on driver instances. The one
    exception is ``PROVIDERS``, the provider registry ADR 0008 documents as a registration point
    (it maps names to modules; it caches nothing)."""
    import tether.models as package

    found: list[str] = []
    for path in sorted(Path(package.__file__).parent.rglob("*.py")):
        relative = path.relative_to(Path(package.__file__).parent).with_suffix("")
        name = ".".join(("tether.models", *relative.parts)).removesuffix(".__init__")
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.startswith("__") or isinstance(value, types.ModuleType):
                continue
            if isinstance(value, _MUTABLE) and attr != "PROVIDERS":
                found.append(f"{name}.{attr}: {type(value).__name__}")
    assert found == []


def test_two_drivers_share_no_memo() -> None:
    history = [user("q"), assistant("a")]
    first = OpenAIChatModel("gpt-4o", api_key="k")
    second = OpenAIChatModel("gpt-4o", api_key="k")
    one = first.request(history)["messages"]
    two = second.request(history)["messages"]
    assert one == two
    assert one[0] is not two[0]  # each driver encoded on its own
    assert first.request(history)["messages"][0] is one[0]  # and reuses its own
    table = first._memos().encodings[first.profile]  # pyright: ignore[reportPrivateUsage]
    assert set(table) == {id(m) for m in history}
    assert second._memos().encodings[second.profile] is not table  # pyright: ignore[reportPrivateUsage]


def test_a_recycled_message_id_never_returns_another_messages_encoding() -> None:
    """Memos are keyed by message identity and checked through a weak reference: when a message
    dies and a new one gets its ``id()``, the new one is encoded afresh."""
    driver = OpenAIChatModel("gpt-4o", api_key="k")
    seen: dict[int, str] = {}
    for n in range(2_000):
        message = Message("user", (Text(f"message {n}"),))
        sent = driver.request([message])["messages"][0]["content"]
        assert sent == f"message {n}"
        if id(message) in seen:
            assert seen[id(message)] != sent
            break
        seen[id(message)] = sent
        del message
        gc.collect()
    else:  # pragma: no cover - CPython reuses a freed id almost at once
        pytest.skip("no id was recycled")
    table = driver._memos().encodings[driver.profile]  # pyright: ignore[reportPrivateUsage]
    assert len(table) <= 1


# -- published token limits ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "window", "output"),
    [
        ("openai:gpt-4o", 128_000, 16_384),
        ("openai:gpt-4o-mini-2024-07-18", 128_000, 16_384),
        ("openai:gpt-4.1-nano", 1_047_576, 32_768),
        ("openai-responses:o3-mini", 200_000, 100_000),
        ("openai-responses:o4-mini", 200_000, 100_000),
        ("openai-responses:gpt-5-2025-08-07", 400_000, 128_000),
        ("openai-responses:gpt-5.4", 1_050_000, 128_000),
        ("anthropic:claude-3-5-haiku-20241022", 200_000, 8_192),
        ("anthropic:claude-3-7-sonnet-20250219", 200_000, 64_000),
        ("anthropic:claude-sonnet-4-20250514", 200_000, 64_000),
        ("anthropic:claude-opus-4-1-20250805", 200_000, 32_000),
        ("anthropic:claude-opus-4-6", 1_000_000, 128_000),
        ("anthropic:claude-haiku-4-5", 200_000, 64_000),
        ("google:gemini-2.0-flash-001", 1_048_576, 8_192),
        ("google:gemini-2.5-pro", 1_048_576, 65_536),
        ("google:models/gemini-3-flash-preview", 1_048_576, 65_536),
    ],
)
def test_profiles_carry_the_published_token_limits(spec: str, window: int, output: int) -> None:
    model = infer_model(spec, api_key="k")
    assert (model.profile.context_window, model.profile.max_output_tokens) == (window, output)


@pytest.mark.parametrize(
    "spec",
    ["openai:gpt-5.9", "anthropic:claude-opus-4-7", "google:gemini-3.7-pro", "openai:llama3"],
)
def test_a_model_nobody_listed_gets_no_numbers_rather_than_wrong_ones(spec: str) -> None:
    model = infer_model(spec, api_key="k")
    assert (model.profile.context_window, model.profile.max_output_tokens) == (None, None)


def test_other_servers_get_no_openai_numbers() -> None:
    ollama = OpenAIChatModel("gpt-4o", base_url="http://127.0.0.1:1/v1", provider="ollama")
    assert ollama.profile.context_window is None


def test_user_limits_override_the_published_ones() -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", context_window=1_000_000)
    assert (model.profile.context_window, model.profile.max_output_tokens) == (1_000_000, 64_000)
    custom = GeminiModel("gemini-2.5-pro", api_key="k", profile=Profile("google"), max_output_tokens=1_024)
    assert (custom.profile.context_window, custom.profile.max_output_tokens) == (None, 1_024)
    chat = infer_model("openai:gpt-4o", api_key="k", context_window=64_000, max_output_tokens=4_000)
    assert (chat.profile.context_window, chat.profile.max_output_tokens) == (64_000, 4_000)
    responses = OpenAIResponsesModel("gpt-5", api_key="k", max_output_tokens=8_000)
    assert (responses.profile.context_window, responses.profile.max_output_tokens) == (400_000, 8_000)
    for bad in (0, -5, 1.5, True, "100"):
        with pytest.raises(UserError, match="positive integer"):
            with_limits(Profile("p"), context_window=bad)  # type: ignore[arg-type]
