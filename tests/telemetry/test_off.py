"""Telemetry off costs nothing: tether imports and runs without OpenTelemetry installed, never
imports it itself, and does no span work while no provider is configured."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from opentelemetry import metrics, trace

from tether.agent import Agent
from tether.models.testing import TestModel
from tether.telemetry import Telemetry, configure, run_trace

from .conftest import Otel

SRC = Path(__file__).resolve().parents[2] / "src"

_RUN_AN_AGENT = """
import asyncio
from tether.agent import Agent
from tether.models.testing import TestModel
from tether.stores import SQLiteStore
from tether.telemetry import Telemetry, TracedStore, continue_trace, record_sanitize
from tether.history import sanitize_history
from tether import user

async def main(db):
    store = TracedStore(SQLiteStore(db))
    _, report = sanitize_history([user("hi")])
    header = {"TraceParent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with continue_trace(header) as link:
        record_sanitize(report)
        result = await Agent(TestModel()).run("hello", store=store, owner="me")
    assert result.output
    assert link.trace_id == "0af7651916cd43dd8448eb211c80319c", link
    assert (await store.load("me", result.conversation_id)).version == 2
    await store.close()
    assert Telemetry().instruments() is None

asyncio.run(main(__import__("sys").argv[1]))
"""


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_tether_runs_without_opentelemetry_installed(tmp_path: Path) -> None:
    blocker = textwrap.dedent(
        """
        import sys
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
                return None
        sys.meta_path.insert(0, Hide())
        """
    )
    check = (
        "\nimport sys\nassert not [m for m in sys.modules if m.startswith('opentelemetry')]\nprint('ok')\n"
    )
    done = _python(blocker + _RUN_AN_AGENT + check, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_tether_never_imports_opentelemetry_itself(tmp_path: Path) -> None:
    check = "\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    done = _python(_RUN_AN_AGENT + check, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_noop_and_unset_providers_turn_telemetry_off() -> None:
    noop = Telemetry(tracer_provider=trace.NoOpTracerProvider(), meter_provider=metrics.NoOpMeterProvider())
    assert noop.instruments() is None
    assert run_trace(noop, "agent") is None
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # nothing set globally here
        assert type(metrics.get_meter_provider()).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider")
        assert Telemetry().instruments() is None
        assert run_trace(None, "agent") is None


async def test_disabled_telemetry_records_nothing_and_instruments_are_cached(otel: Otel) -> None:
    await Agent(TestModel(), telemetry=otel.telemetry(enabled=False)).run("hi")
    assert otel.spans() == []
    settings = otel.telemetry()
    first = settings.instruments()
    assert first is not None
    assert settings.instruments() is first  # resolved once per provider


async def test_configure_sets_the_default_for_agents_without_their_own(otel: Otel) -> None:
    previous = configure(otel.telemetry())
    try:
        await Agent(TestModel(), name="configured").run("hi")
    finally:
        configure(previous)
    (run,) = otel.named("invoke_agent")
    assert run.name == "invoke_agent configured"
    await Agent(TestModel()).run("hi")  # restored: no longer traced here
    assert len(otel.named("invoke_agent")) == 1


def test_a_global_provider_set_after_earlier_runs_is_picked_up(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from tether.agent import Agent
        from tether.models.testing import TestModel

        agent = Agent(TestModel(), name="late")
        asyncio.run(agent.run("before"))          # no provider yet: nothing to record
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        asyncio.run(agent.run("after"))
        print(sorted(s.name for s in exporter.get_finished_spans()))
        """
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['chat test', 'invoke_agent late']"
