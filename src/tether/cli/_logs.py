"""``tether logs …``: list, show, search and export stored conversations."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tether.cli._common import (
    err_console,
    json_option,
    out_console,
    print_json,
    to_jsonable,
    write_output,
)
from tether.cli._compaction import render_with_records
from tether.cli._render import preview, render_report
from tether.cli._store import (
    DEFAULT_OWNER,
    DbOpt,
    OwnerOpt,
    open_store,
    resolve_conversation,
    short_ids,
)
from tether.messages import dumps
from tether.stores import SearchResults

__all__ = ["logs_app"]

logs_app = typer.Typer(
    help="Browse the conversations stored by tether chat (or any SQLite store).", no_args_is_help=True
)

CidArg = Annotated[
    str | None,
    typer.Argument(
        help="Conversation id, or a unique beginning or ending of one (the short id logs list shows); "
        "the most recent when omitted.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, json_option("Print JSON for programs.")]


@logs_app.command("list")
def list_conversations(
    db: DbOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N conversations.", min=1)] = 20,
    as_json: JsonOpt = False,
) -> None:
    """List conversations, most recently updated first, with the first prompt, message count and model."""

    async def run() -> tuple[list[Any], dict[str, str]]:
        async with open_store(db, create=False) as store:
            everything = await store.conversations(owner)
            shown = everything[:limit]
            ids = (c.conversation_id for c in shown)
            return shown, short_ids(ids, among=(c.conversation_id for c in everything))

    infos, short = asyncio.run(run())
    if as_json:
        print_json(
            [
                {
                    "conversation_id": i.conversation_id,
                    "short_id": short[i.conversation_id],
                    "updated_at": i.updated_at.isoformat(),
                    "created_at": i.created_at.isoformat(),
                    "messages": i.message_count,
                    "model": i.last_model,
                    "preview": i.preview,
                    "forked_from": to_jsonable(i.forked_from),
                }
                for i in infos
            ]
        )
        return
    console = out_console()
    if not infos:
        console.print("no conversations yet (start one with: tether chat)")
        return
    table = Table(
        show_edge=False, caption="conversation: the id's shortest unique ending (logs show takes it)"
    )
    for column in ("conversation", "updated (UTC)", "messages", "model", "first prompt"):
        # the preview folds rather than shrinking to "…" on a narrow or piped terminal
        prompt = column == "first prompt"
        table.add_column(column, no_wrap=not prompt, min_width=24 if prompt else None)
    for info in infos:
        table.add_row(
            escape(short[info.conversation_id]),
            info.updated_at.strftime("%Y-%m-%d %H:%M"),
            str(info.message_count),
            escape(info.last_model or "-"),
            escape(preview(info.preview or "")),
        )
    console.print(table)


@logs_app.command("show")
def show(
    conversation: CidArg = None,
    db: DbOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    reasoning: Annotated[
        bool, typer.Option("--reasoning", help="Expand reasoning instead of collapsing it.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show one conversation: text, tool calls and results, reasoning collapsed, compaction records marked."""

    async def run() -> tuple[str, Any, Any]:
        async with open_store(db, create=False) as store:
            cid = await resolve_conversation(store, owner, conversation)
            loaded = await store.load(owner, cid)
            return cid, loaded, await store.records(owner, cid)

    cid, loaded, records = asyncio.run(run())
    if as_json:
        write_output("-", dumps(loaded.messages))
        return
    console = out_console()
    kept = f", {len(records)} compaction record{'s' if len(records) != 1 else ''}" if records else ""
    console.print(f"[bold]conversation[/] {cid}  [dim]({loaded.version} messages{kept})[/]")
    render_with_records(console, loaded.messages, records, show_reasoning=reasoning)


@logs_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words, identifiers, paths or numbers to look for.")],
    db: DbOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    limit: Annotated[
        int, typer.Option("--limit", "-n", help="Show at most N messages.", min=1, max=1000)
    ] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Search the messages of every conversation, best match first, with a snippet of each."""

    async def run() -> tuple[SearchResults, dict[str, str]]:
        async with open_store(db, create=False) as store:
            found = await store.search(owner, query, limit=limit)
            everything = [c.conversation_id for c in await store.conversations(owner)]
            short = short_ids({h.conversation_id for h in found.hits}, among=everything)
            return found, short

    found, short = asyncio.run(run())
    if as_json:
        out = found.to_dict()
        for hit in out["hits"]:
            hit["short_id"] = short[hit["conversation_id"]]
        print_json(out)
        return
    console = out_console()
    if not found.hits:
        console.print(f"no message matches {escape(query)!r} ({found.conversations} conversations searched)")
    else:
        table = Table(show_edge=False, caption="logs show CONVERSATION shows a whole conversation")
        for column in ("conversation", "message", "role", "snippet"):
            table.add_column(
                column, no_wrap=column != "snippet", min_width=24 if column == "snippet" else None
            )
        for hit in found.hits:
            table.add_row(
                escape(short[hit.conversation_id]),
                str(hit.seq),
                hit.role,
                escape(" ".join(hit.snippet.split())),
            )
        console.print(table)
    if not found.complete:
        console.print(f"[yellow]search incomplete:[/] {escape(found.note or '')}")


@logs_app.command("export")
def export(
    conversation: CidArg = None,
    db: DbOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="tether (JSON contract) or a tether.convert format name.")
    ] = "tether",
    output: Annotated[
        str, typer.Option("--output", "-o", help="File to write; - (default) is stdout.")
    ] = "-",
    as_json: JsonOpt = False,
) -> None:
    """Export one conversation as tether JSON or any tether.convert format, with the loss report."""
    # imported here, not at the top: the converters cost `tether logs --help` ~30 ms (bench.startup)
    from tether.cli._formats import export_messages

    async def run() -> tuple[str, Any]:
        async with open_store(db, create=False) as store:
            cid = await resolve_conversation(store, owner, conversation)
            return cid, await store.load(owner, cid)

    cid, loaded = asyncio.run(run())
    data, report = export_messages(loaded.messages, fmt)
    write_output(output, data)
    summary: dict[str, Any] = {
        "conversation_id": cid,
        "format": fmt,
        "messages": len(loaded.messages),
        "losses": to_jsonable(report.losses),
    }
    to_err = output == "-"
    if as_json:
        print_json(summary, err=to_err)
    else:
        render_report(err_console() if to_err else out_console(), "export", summary)
