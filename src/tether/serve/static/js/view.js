// The conversation: stored messages (the tether JSON contract) and a run's live events, drawn
// with text nodes only. Tool calls are cards keyed by call id; their results land on them.

import { append, clear, h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

/** Answers cut short by the model's limits: kept and shown, marked. */
/** What a continued run does again, by ``run.recovered``'s ``repeats``. */
const RECOVERED_TEXT = {
  prompt: "It starts again from your message.",
  model_request: "The reply in progress is asked for again.",
  tool_calls: "Its tool calls run (a started action is not repeated).",
  nothing: "",
};

const CUT_TEXT = new Map([
  ["length", "Cut: the answer reached its length limit."],
  ["repetition", "Cut: the model was repeating itself."],
]);

const SYNTHESIZED_NOTE = "Not a real result: tether wrote it because the real one is missing " +
  "(the run was interrupted, stopped, or the outcome of a side effect is unknown).";

function prettyArguments(text) {
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error("not an object");
    return { text: JSON.stringify(value, null, 2), truncated: false };
  } catch {
    return { text, truncated: true };
  }
}

function mediaLabel(part) {
  const what = part.type === "image" ? "image" : "document";
  if (part.url) return `[${what}: ${part.url}]`;
  return `[${what}: ${part.mediaType ?? "inline data"}${part.title ? `, ${part.title}` : ""}]`;
}

function resultText(result) {
  return (result.content ?? [])
    .map((p) => (p.type === "text" ? p.text : mediaLabel(p)))
    .join("\n");
}

function usageText(usage) {
  if (!usage) return null;
  const bits = [];
  if (usage.inputTokens) bits.push(`${usage.inputTokens} in`);
  if (usage.outputTokens) bits.push(`${usage.outputTokens} out`);
  if (usage.reasoningTokens) bits.push(`${usage.reasoningTokens} reasoning`);
  if (usage.cacheReadTokens) bits.push(`${usage.cacheReadTokens} cached`);
  return bits.length ? `${bits.join(", ")} tokens` : null;
}

function metaList(pairs) {
  const dl = h("dl", { class: "meta" });
  for (const [label, value] of pairs) {
    if (value === null || value === undefined || value === "") continue;
    dl.append(h("dt", { text: label }), h("dd", {}, h("code", { text: String(value) })));
  }
  return dl;
}

export class ConversationView {
  constructor(container, { onFork, onDecide }) {
    this.el = container;
    this.onFork = onFork;
    this.onDecide = onDecide;
    this.reset(null);
  }

  reset(conversationId) {
    this.conversationId = conversationId;
    this.cards = new Map();
    this.live = null;
    this.waitingEl = null;
    this.runNotes = new Map();
    this.approval = null;
    clear(this.el);
  }

  get nearBottom() {
    const scroller = this.el;
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
  }

  follow(wasNearBottom) {
    if (wasNearBottom) this.el.scrollTop = this.el.scrollHeight;
  }

  busy(fn) {
    this.el.setAttribute("aria-busy", "true");
    try {
      fn();
    } finally {
      this.el.setAttribute("aria-busy", "false");
    }
  }

  // -- stored messages ---------------------------------------------------------------------------
  renderStored(messages, { skipRunId = null, compactions = [] } = {}) {
    // a record stands for messages 1..boundary: its line follows message boundary - 1
    const after = new Map();
    for (const record of compactions) {
      const at = Math.min(record.boundary, messages.length) - 1;
      after.set(at, [...(after.get(at) ?? []), record]);
    }
    this.busy(() => {
      messages.forEach((message, index) => {
        if (!(skipRunId && message.runId === skipRunId)) this.addMessage(message, index);
        for (const record of after.get(index) ?? []) this.el.append(this.compactionNode(record));
      });
    });
    this.el.scrollTop = this.el.scrollHeight;
  }

  empty(text) {
    this.el.append(h("p", { class: "empty muted", text }));
  }

  addMessage(message, index = null) {
    const near = this.nearBottom;
    this.el.querySelector(".empty")?.remove();
    if (message.role === "tool") {
      for (const part of message.parts) if (part.type === "tool-result") this.setResult(part);
      this.follow(near);
      return;
    }
    const node = this.messageNode(message, index);
    this.el.append(node);
    this.follow(near);
    return node;
  }

  messageNode(message, index) {
    const role = message.role;
    const attrs = {
      class: `msg ${role}`,
      dataset: { role, ...(message.runId ? { runId: message.runId } : {}), ...(index !== null ? { index: String(index) } : {}) },
      title: message.runId ? `run ${message.runId}` : null,
    };
    const label = role === "user" ? "You" : role === "assistant" ? "tether" : "System";
    const node = h("article", attrs, h("h3", { class: "who-label", text: label }));
    const body = h("div", { class: "msg-body" });
    node.append(body);
    for (const part of message.parts ?? []) {
      if (part.type === "text") {
        if (role === "assistant") body.append(h("div", { class: "md" }, renderMarkdown(part.text)));
        else body.append(h("p", { class: "plain", text: part.text }));
      } else if (part.type === "reasoning") {
        body.append(this.reasoningNode(part.redacted ? "(redacted reasoning)" : part.text));
      } else if (part.type === "tool-call") {
        body.append(this.card(part.id, part.name, part.arguments));
      } else if (part.type === "image" || part.type === "document") {
        body.append(h("p", { class: "media", text: mediaLabel(part) }));
      }
    }
    if (role === "assistant") {
      if (message.stopReason === "canceled") {
        node.classList.add("stopped");
        body.append(h("p", { class: "badge stopped-badge", text: "Stopped: this is the text streamed until then." }));
      }
      const cut = CUT_TEXT.get(message.stopReason);
      if (cut) {
        node.classList.add("cut");
        body.append(h("p", { class: "badge stopped-badge", dataset: { kind: "cut" }, text: cut }));
      }
      node.append(this.footer(message, index));
    }
    return node;
  }

  footer(message, index) {
    const details = h(
      "details", { class: "msg-details" },
      h("summary", { text: "Details" }),
      metaList([
        ["Run", message.runId],
        ["Conversation", message.conversationId ?? this.conversationId],
        ["Message", index],
        ["Model", message.model],
        ["Provider", message.provider],
        ["Stop reason", message.stopReason],
        ["Usage", usageText(message.usage)],
      ]),
    );
    const footer = h("footer", { class: "msg-footer" }, details);
    const hasCalls = (message.parts ?? []).some((p) => p.type === "tool-call");
    if (index !== null && !hasCalls && this.onFork) {
      footer.append(h("button", {
        type: "button",
        class: "quiet fork",
        text: "Fork from here",
        "aria-label": `Continue from message ${index + 1} in a copy`,
        onclick: () => this.onFork(index + 1),
      }));
    }
    return footer;
  }

  /** Where a compaction record sits: the model sees its summary instead of the messages above. */
  compactionNode(record) {
    const tokens = (n) => Number(n).toLocaleString();
    const box = h("details", { class: "compaction", dataset: { kind: "compaction", record: record.id } },
      h("summary", {
        text: `Messages above are summarized for the model (${tokens(record.tokens_before)} → ` +
          `${tokens(record.tokens_after)} tokens); the conversation keeps them all`,
      }));
    box.append(h("p", { class: "plain compaction-summary", text: record.summary }));
    return box;
  }

  reasoningNode(text) {
    const box = h("details", { class: "reasoning" }, h("summary", { text: "Reasoning" }));
    const content = h("p", { class: "plain", text });
    box.append(content);
    box.content = content;
    return box;
  }

  // -- tool cards ---------------------------------------------------------------------------------
  card(callId, name, args) {
    // A call id names the latest card made for it: a result pairs with the call just before it.
    // An earlier card of the same id stays (a model may reuse "call_0" every turn); a live card
    // goes with the live message the completed one replaces.
    const pretty = prettyArguments(args ?? "");
    const argsPre = h("pre", { class: "args", text: pretty.text });
    const status = h("span", { class: "tool-status", text: "waiting" });
    const card = h(
      "section",
      { class: "tool-card", dataset: { callId: callId ?? "", state: "pending", tool: name }, "aria-label": `Tool call ${name}` },
      h("header", {}, h("span", { class: "tool-name", text: name }), status),
      h("details", { class: "tool-args" }, h("summary", { text: "Arguments" }),
        pretty.truncated ? h("p", { class: "warn", text: "Not a complete JSON object (truncated or malformed): shown as the model wrote it." }) : null,
        argsPre),
    );
    card.statusEl = status;
    card.argsEl = argsPre;
    if (callId) this.cards.set(callId, card);
    return card;
  }

  setCardState(callId, state, text) {
    const card = this.cards.get(callId);
    if (!card) return null;
    card.dataset.state = state;
    card.statusEl.textContent = text;
    return card;
  }

  setResult(result) {
    let card = this.cards.get(result.callId);
    if (!card) {
      card = this.card(result.callId, result.name || "tool", "{}");
      this.el.append(card);
    }
    card.querySelector(".tool-result")?.remove();
    const state = result.synthesized ? "synthesized" : result.failed ? "failed" : "done";
    const label = result.synthesized ? "no real result" : result.failed ? "failed" : "done";
    card.dataset.state = state;
    card.statusEl.textContent = label;
    const section = h("div", { class: "tool-result" },
      h("h4", { text: result.synthesized ? "Synthesized result" : result.failed ? "Failed result" : "Result" }),
      result.synthesized ? h("p", { class: "note", text: SYNTHESIZED_NOTE }) : null,
      h("pre", { class: "result-text", text: resultText(result) }));
    card.append(section);
  }

  // -- a run's live events ------------------------------------------------------------------------
  liveMessage(step) {
    if (this.live && this.live.step === step) return this.live;
    const body = h("div", { class: "msg-body" });
    const el = h("article", { class: "msg assistant streaming", dataset: { role: "assistant", live: "true" } },
      h("h3", { class: "who-label", text: "tether" }), body);
    this.el.append(el);
    this.live = { step, el, body, texts: new Map(), reasoning: new Map(), calls: new Map() };
    return this.live;
  }

  /** The run waits for the model (a slow first token, a long think): say so until it answers. */
  waiting(on) {
    if (!on) {
      this.waitingEl?.remove();
      this.waitingEl = null;
    } else if (!this.waitingEl) {
      this.waitingEl = h("p", { class: "run-waiting muted", dataset: { kind: "waiting" }, text: "Waiting for the model…" });
      this.el.append(this.waitingEl);
    }
  }

  event(event) {
    const near = this.nearBottom;
    this.el.querySelector(".empty")?.remove();
    // the model is asked after the prompt, after a step's results and after a resume
    const asks = (event.type === "message.completed" && ["user", "tool"].includes(event.message.role)) ||
      event.type === "run.resumed" || event.type === "history.compacted";
    this.waiting(false);
    switch (event.type) {
      case "text.delta": {
        const live = this.liveMessage(event.step);
        let node = live.texts.get(event.index);
        if (!node) {
          node = h("div", { class: "stream-text" });
          live.texts.set(event.index, node);
          live.body.append(node);
        }
        node.append(event.text);
        break;
      }
      case "reasoning.delta": {
        const live = this.liveMessage(event.step);
        let box = live.reasoning.get(event.index);
        if (!box) {
          box = this.reasoningNode("");
          live.reasoning.set(event.index, box);
          live.body.prepend(box);
        }
        box.content.append(event.text);
        break;
      }
      case "tool.delta": {
        const live = this.liveMessage(event.step);
        let card = live.calls.get(event.index);
        if (!card) {
          card = this.card(event.id, event.name ?? "tool", "");
          card.argsEl.textContent = "";
          live.calls.set(event.index, card);
          live.body.append(card);
        }
        card.argsEl.append(event.arguments);
        break;
      }
      case "message.completed": {
        const message = event.message;
        if (message.role === "assistant" && this.live) {
          const node = this.messageNode(message, null);
          this.live.el.replaceWith(node);
          this.live = null;
        } else {
          this.addMessage(message, null);
        }
        break;
      }
      case "tool.started":
        this.setCardState(event.call.id, "running", "running…");
        break;
      case "tool.finished":
        this.setResult(event.result);
        break;
      case "history.compacted":
        // the model sees a summary from now on; the stored conversation keeps every message
        this.el.append(h("p", {
          class: "run-note compacted",
          dataset: { kind: "compacted" },
          text: `Earlier messages were summarized to fit the model's context (${event.line}). ` +
            "The conversation itself keeps every message.",
        }));
        break;
      case "run.paused":
        this.showApproval(event);
        break;
      case "run.resumed":
        this.clearApproval();
        break;
      case "run.recovered": {
        // the process running it died: what it was streaming is lost and asked again
        this.live?.el.remove();
        this.live = null;
        const again = RECOVERED_TEXT[event.repeats] ?? "";
        this.el.append(h("p", {
          class: "run-note recovered",
          dataset: { kind: "recovered" },
          text: `The server running this reply stopped; another one continues it from what was stored. ${again}`.trim(),
        }));
        if (event.repeats !== "nothing") this.waiting(true);
        break;
      }
      default:
        break;
    }
    if (asks) this.waiting(true);
    this.follow(near);
  }

  /** A run ended: its last words, when they are not a plain completion. */
  note(kind, text) {
    this.el.append(h("p", { class: `run-note ${kind}`, dataset: { kind }, text }));
    this.el.scrollTop = this.el.scrollHeight;
  }

  /** A prompt the run took but the store does not hold (its process died before writing it). */
  lostPrompt(text, onRetry) {
    this.el.append(h("article", { class: "msg lost", dataset: { kind: "lost" } },
      h("h3", { class: "who-label", text: "You (not kept)" }),
      h("div", { class: "msg-body" }, h("p", { class: "plain", text })),
      h("footer", { class: "msg-footer" },
        h("span", { text: "The run ended before this message was stored." }),
        h("button", { type: "button", class: "quiet", text: "Edit and send again", onclick: onRetry }))));
    this.el.scrollTop = this.el.scrollHeight;
  }

  // -- approvals ----------------------------------------------------------------------------------
  showApproval(pause) {
    this.clearApproval();
    const decisions = new Map();
    const list = h("ul", { class: "pending-calls" });
    const panel = h("section", { class: "approval", "aria-labelledby": "approval-title", dataset: { pauseId: pause.pause_id } },
      h("h3", { id: "approval-title", text: "The run waits for your decision" }),
      h("p", { class: "muted", text: "Nothing runs until every pending call is decided. Stop ends the run instead." }),
      list);
    const error = h("p", { class: "error", role: "alert", hidden: true });
    panel.append(error);
    const submit = async () => {
      const wanted = pause.calls.filter((c) => c.kind === "approval");
      if (wanted.some((c) => !decisions.has(c.call_id))) return;
      panel.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      try {
        await this.onDecide(pause.pause_id, wanted.map((c) => decisions.get(c.call_id)));
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
        panel.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      }
    };
    for (const call of pause.calls) {
      this.setCardState(call.call_id, "waiting", call.kind === "approval" ? "waiting for approval" : "waiting for the client");
      const pretty = prettyArguments(call.arguments);
      const item = h("li", { class: "pending-call", dataset: { callId: call.call_id } },
        h("p", {}, h("strong", { text: call.name }), " ", h("span", { class: "muted", text: `(${call.call_id})` })),
        h("pre", { class: "args", text: pretty.text }));
      if (call.kind === "approval") {
        const reasonId = `deny-reason-${call.call_id}`;
        const reason = h("input", { id: reasonId, type: "text", placeholder: "optional: why (the model sees it)" });
        const chosen = h("p", { class: "chosen", "aria-live": "polite" });
        const choose = (decision) => {
          const entry = { call_id: call.call_id, decision };
          if (decision === "deny" && reason.value.trim()) entry.reason = reason.value.trim();
          decisions.set(call.call_id, entry);
          chosen.textContent = decision === "approve" ? "Approved" : "Denied";
          submit();
        };
        append(item, [
          h("div", { class: "approval-actions" },
            h("button", { type: "button", class: "primary", text: "Approve", "aria-label": `Approve ${call.name}`, onclick: () => choose("approve") }),
            h("button", { type: "button", class: "danger", text: "Deny", "aria-label": `Deny ${call.name}`, onclick: () => choose("deny") }),
            h("label", { for: reasonId, class: "sr-only", text: `Reason for denying ${call.name}` }),
            reason),
          chosen,
        ]);
      } else {
        item.append(h("p", { class: "muted", text: "An external tool: the application that runs it sends its result. Stop the run to go on without it." }));
      }
      list.append(item);
    }
    this.approval = panel;
    this.el.append(panel);
    panel.querySelector("button")?.focus({ preventScroll: true });
  }

  clearApproval() {
    this.approval?.remove();
    this.approval = null;
  }
}
