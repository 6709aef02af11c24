"""The AI SDK section of docs/compatibility.md (rendered by ``_compat``): what the UI messages of
``POST /v1/aisdk/chat`` carry into tether, and what tether cannot send back in a UI message
stream. The mapping itself is ``tether.serve.aisdk`` (ADR 0018)."""

from __future__ import annotations

__all__ = ["AISDK"]

AISDK: tuple[str | tuple[tuple[str, str], list[tuple[str, str]]], ...] = (
    """
## AI SDK

`POST /v1/aisdk/chat` of `tether serve` speaks the Vercel AI SDK's UI message stream protocol `v1`
([docs/ai-sdk.md](ai-sdk.md), decisions in [ADR 0018](adr/0018-ai-sdk-chat.md)). The client's
messages are untrusted: they are converted as below, then sanitized; what was dropped is reported
in the message metadata `tether.input` (`losses`, `sanitize`), every index in it a position in the
client's `messages` (and `parts` lists).

From a client (`DefaultChatTransport`'s `messages`):
""",
    (
        ("AI SDK", "tether"),
        [
            ("user `text` parts", "`Text`"),
            (
                "user `file` parts (a `data:` URL or a URL)",
                "`Image` (`image/*`) or `Document` (then sanitize drops URLs that are not `http`/`https`)",
            ),
            ("a `file` part of the prompt (the last message)", "dropped, reported: the prompt is text"),
            ("`system` messages", "system messages, then dropped by sanitize"),
            (
                "an assistant message: `step-start`, `text`, `tool-<name>` / `dynamic-tool` parts",
                (
                    "one assistant message per step (`Text`, `ToolCall` with `input` as JSON), each "
                    "followed by a tool message with the outputs its calls have"
                ),
            ),
            (
                "a tool part's `output-available` / `output-error` / `output-denied`",
                (
                    "a result (the output's text, or its JSON) / a failed result / a failed result "
                    "saying it was denied"
                ),
            ),
            (
                "a tool part without an output (`input-available`, `approval-requested`, …)",
                "a call without a result: sanitize synthesizes one (outcome unknown, never re-run)",
            ),
            (
                "`reasoning` parts",
                "dropped, reported (unsigned reasoning from a client is never replayed)",
            ),
            (
                "`source-url`, `source-document`, `data-<name>`, `custom`, `reasoning-file` parts, "
                "an assistant's `file` parts, `metadata`",
                "dropped, reported",
            ),
            (
                "the chat `id`; message ids",
                "the conversation id; not kept (the assistant message's id is the run id)",
            ),
            (
                "`trigger: regenerate-message`; an edited message (`messageId` of the last one)",
                "refused (422): tether keeps every turn; send the prompt again",
            ),
            ("other fields of the body (the transport's `body` option)", "not used"),
        ],
    ),
    """
On a chat the server already holds, only the last user message (the prompt), or the answers in
the last (assistant) message to the paused run's calls, are taken; the rest of the client's copy
is ignored (`ignoredMessages`).

What a UI message stream cannot carry to a client:
""",
    (
        ("tether", "in the AI SDK"),
        [
            (
                (
                    "reasoning `signature`, redacted reasoning, `provider`; "
                    "`Text.signature`, `ToolCall.signature`, `providerId`"
                ),
                "not sent (the server keeps the history, so a client never sends them back)",
            ),
            (
                "tool call arguments as the model streams them",
                "sent whole when the model's message completes (the ids and arguments the run executes)",
            ),
            (
                "a tool call's arguments that are not JSON",
                "`tool-input-error` with the raw text as `input`",
            ),
            ("a tool call without an id", "an id is made up (`<run id>.<epoch>.<step>.<part>.call`)"),
            (
                "a result's content (text, images, documents) and its `synthesized` flag",
                "`output`: the result's text; a synthesized result is `tool-output-error`",
            ),
            ("images and documents in an assistant message", "not sent"),
            (
                "per-message `model`, `provider`, `stopReason`, `usage`",
                (
                    "the run's usage in `metadata.tether.usage`; a reply cut at its limit is "
                    "`finishReason: length`"
                ),
            ),
            ("the user's message as stored (its id, the seeded history)", "not sent: the page holds its own"),
            (
                "a run stopped with `POST /v1/runs/{id}/cancel`",
                "`abort`, then `finish` (`other`); the partial text stays as streamed",
            ),
            (
                "a run that moved to another process after a crash or a stop (`run.recovered`)",
                (
                    "the lost request's parts end (their text stays in the client's message, not in the "
                    "conversation), a transient `data-tether-recovered` part (`fromProcess`, `repeats`, "
                    "`reason`), then the continuation in a new step"
                ),
            ),
            (
                "a run interrupted by a server stop or crash (`--no-durable`); a failed run",
                "an `error` part (the reason, or `<error type>: <message>`), then `finish` (`error`)",
            ),
            (
                "in `GET /v1/aisdk/chat/{id}/messages`: a denied or synthesized result; the "
                "approvals asked and given",
                "`output-error` with the result's text; not listed (the stored messages keep no approvals)",
            ),
            (
                "the report of what was done with the request's messages on a reconnect",
                "not sent again: a replayed turn's metadata has `conversationId`, `runId`, `status`",
            ),
        ],
    ),
    """""",
)
"""The AI SDK section: prose, and (header, rows) tables (as ``_compat._AGUI``)."""
