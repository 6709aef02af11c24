"""``tether history …``: check, normalize, sanitize, trim, compact and convert history files."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from tether.agent import Compaction, Compactor
from tether.agent.compaction import model_window
from tether.cli._common import (
    EXIT_PROBLEMS,
    dump_history,
    err_console,
    fail,
    json_option,
    load_history,
    out_console,
    print_json,
    read_input,
    to_jsonable,
    write_output,
)
from tether.cli._formats import export_messages, import_messages
from tether.cli._model import resolve_model
from tether.cli._render import render_report
from tether.history import (
    BudgetHistory,
    HistoryRepair,
    TrimHistory,
    approximate_counter,
    budget_history,
    check_history,
    normalize_history,
    sanitize_history,
    trim_history,
)
from tether.models.testing import TestModel

__all__ = ["REPAIR_REASONS", "build_processor", "history_app", "repair_report"]

history_app = typer.Typer(
    help="Check, repair, sanitize, trim, compact and convert history files (tether JSON unless --from says "
    "otherwise). FILE may be - for standard input.",
    no_args_is_help=True,
)

FileArg = Annotated[str, typer.Argument(help="History file to read; - reads standard input.", metavar="FILE")]
OutOpt = Annotated[
    str, typer.Option("--output", "-o", help="Where to write the resulting history; - (default) is stdout.")
]
JsonOpt = Annotated[bool, json_option("Print the report as JSON for programs.")]


REPAIR_REASONS: dict[str, str] = {
    "synthesized": "missing-result",
    "truncated": "arguments-not-json-object",
}
"""The reason shown for each synthesized result and each truncated call: ``tether.history`` gives
those entries no reason of their own (the list they are in says it), while dropped results and
unpaired calls carry theirs (``duplicate``, ``no-call``, ``before-call``, ``not-after-call``,
``no-id``, ``duplicate-id``)."""


def repair_report(repair: HistoryRepair) -> dict[str, Any]:
    """A ``HistoryRepair`` as JSON values with a non-empty ``reason`` on every listed call."""
    report: dict[str, Any] = to_jsonable(repair)
    for key, reason in REPAIR_REASONS.items():
        refs: list[dict[str, Any]] = report[key]
        for ref in refs:
            ref["reason"] = ref["reason"] or reason
    return report


def _emit_report(title: str, report: dict[str, Any], *, as_json: bool, output: str | None) -> None:
    """Reports go to stdout, unless the history itself is being written there: then stderr."""
    to_err = output == "-"
    if as_json:
        print_json(report, err=to_err)
    else:
        render_report(err_console() if to_err else out_console(), title, report)


@history_app.command("check")
def check(file: FileArg, as_json: JsonOpt = False) -> None:
    """Report pairing problems and what normalize would repair. Exit code 1 when repairs are needed."""
    history = load_history(file)
    problems = check_history(history)
    _, repair = normalize_history(history)
    needs_repair = bool(problems) or bool(repair.changed)
    report: dict[str, Any] = {
        "messages": len(history),
        "needs_repair": needs_repair,
        "problems": to_jsonable(problems),
        "repair": repair_report(repair),
    }
    _emit_report(f"{file}: {'needs repair' if needs_repair else 'ok'}", report, as_json=as_json, output=None)
    if needs_repair:
        raise typer.Exit(EXIT_PROBLEMS)


@history_app.command("normalize")
def normalize(file: FileArg, output: OutOpt = "-", as_json: JsonOpt = False) -> None:
    """Repair tool-call pairing (synthesize missing results, drop orphans) and print the repair report."""
    history = load_history(file)
    repaired, repair = normalize_history(history)
    write_output(output, dump_history(repaired))
    _emit_report("repair", repair_report(repair), as_json=as_json, output=output)


@history_app.command("sanitize")
def sanitize(file: FileArg, output: OutOpt = "-", as_json: JsonOpt = False) -> None:
    """Clean untrusted history: drop system prompts and unsafe URL parts, repair pairing; print the report."""
    history = load_history(file)
    cleaned, report = sanitize_history(history)
    write_output(output, dump_history(cleaned))
    _emit_report(
        "sanitize",
        {**to_jsonable(report), "repair": repair_report(report.repair)},
        as_json=as_json,
        output=output,
    )


def build_processor(max_messages: int | None, budget: int | None) -> TrimHistory | BudgetHistory | None:
    """``trim_history`` or ``budget_history`` from the command-line options (at most one)."""
    if max_messages is not None and budget is not None:
        fail("give either --max-messages or --budget, not both")
    if max_messages is not None:
        if max_messages < 1:
            fail("--max-messages must be at least 1")
        return trim_history(max_messages)
    if budget is not None:
        if budget < 1:
            fail("--budget must be at least 1 token")
        return budget_history(approximate_counter(), budget)
    return None


@history_app.command("trim")
def trim(
    file: FileArg,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", help="Keep the newest N messages (trim_history).")
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option("--budget", "-b", help="Keep the newest messages within TOKENS approximate tokens."),
    ] = None,
    output: OutOpt = "-",
    as_json: JsonOpt = False,
) -> None:
    """Keep the newest messages (by count or token budget) without splitting a tool call from its result."""
    processor = build_processor(max_messages, budget)
    if processor is None:
        fail("give --max-messages N or --budget TOKENS")
    history = load_history(file)
    kept, trimmed = processor.apply(history)
    write_output(output, dump_history(kept))
    report: dict[str, Any] = {"messages": len(history), **to_jsonable(trimmed)}
    _emit_report("trim", report, as_json=as_json, output=output)


@history_app.command("convert")
def convert(
    file: FileArg,
    source: Annotated[
        str, typer.Option("--from", "-f", help="Input format: tether or a tether.convert format name.")
    ] = "tether",
    target: Annotated[
        str, typer.Option("--to", "-t", help="Output format: tether or a tether.convert format name.")
    ] = "tether",
    output: OutOpt = "-",
    as_json: JsonOpt = False,
) -> None:
    """Convert a transcript between tether JSON and provider/peer formats, with the loss report."""
    data = read_input(file)
    messages, import_report = import_messages(data, source, name="stdin" if file == "-" else file)
    payload, export_report = export_messages(messages, target)
    write_output(output, payload)
    report: dict[str, Any] = {
        "from": source,
        "to": target,
        "messages": len(messages),
        "import_losses": to_jsonable(import_report.losses),
        "export_losses": to_jsonable(export_report.losses),
    }
    _emit_report("conversion", report, as_json=as_json, output=output)


@history_app.command("compact")
def compact(
    file: FileArg,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            envvar="TETHER_MODEL",
            help="The summarizer, provider:model (as for tether chat); not needed with --strategy elide.",
            show_default=False,
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            "-w",
            help="The context window in tokens (default: the model's, where its provider publishes it).",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            help="elide or summarize, in the order to try (repeat the option); default: elide, summarize.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compact even when the history is under the threshold.")
    ] = False,
    output: OutOpt = "-",
    as_json: JsonOpt = False,
) -> None:
    """Compact a history: old tool output elided, older messages summarized; write the compacted view."""
    strategies = tuple(strategy or ("elide", "summarize"))
    for name in strategies:
        if name not in ("elide", "summarize"):
            fail(f"unknown --strategy {name!r}: give elide or summarize")
    if "summarize" in strategies and model is None:
        fail("summarizing needs a model: give --model provider:model (or --strategy elide)")
    history = load_history(file)
    summarizer = resolve_model(model) if model is not None else TestModel()
    size = window if window is not None else model_window(summarizer)
    if size is None:
        fail(f"the context window of {summarizer.name} is not known: give --window TOKENS")
    if size < 256:
        fail("--window must be at least 256 tokens")
    compactor = Compactor(
        Compaction(strategies=strategies, window=size, recall=False),  # type: ignore[arg-type]  # checked above
        summarizer,
        conversation_id="file",
    )

    async def run() -> Any:
        try:
            return await compactor.prepare(history, window=size, force=force)
        finally:
            await compactor.aclose()

    prepared = asyncio.run(run())
    view = list(prepared.messages)
    write_output(output, dump_history(view))
    report = prepared.report
    result: dict[str, Any] = {
        "messages": len(history),
        "view_messages": len(view),
        "window": size,
        "compacted": report is not None,
        "report": report.to_dict() if report is not None else None,
        "summary": prepared.record.summary if prepared.record is not None else None,
    }
    title = (
        report.line() if report is not None else "under the threshold: nothing compacted (--force compacts)"
    )
    _emit_report(title, result, as_json=as_json, output=output)
