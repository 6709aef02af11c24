// The tether web page: sign-in, the conversation list, a conversation and its runs.

import { Api, ApiError, RunFollower } from "./api.js";
import { $, clear, h, relativeTime, sleep } from "./dom.js";
import { setupImport } from "./importer.js";
import { ConversationView } from "./view.js";

const TOKEN_KEY = "tether.token";
const ACTIVE = new Set(["running", "paused"]);
const CONNECTION_TEXT = {
  idle: "Idle",
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Connection lost: reconnecting…",
  offline: "Offline: waiting for the network…",
  ended: "Idle",
};

const state = {
  api: null,
  user: null,
  conversationId: null,
  run: null, // the active run of the open conversation: {id, status, pause}
  follower: null,
  listOffset: 0,
  opening: 0,
};

let view;

// -- small UI pieces ----------------------------------------------------------------------------
function banner(text) {
  const el = $("banner");
  el.textContent = text ?? "";
  el.hidden = !text;
}

let toastTimer = null;
function toast(text) {
  const el = $("toast");
  el.textContent = text;
  el.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.classList.remove("show"), 4000);
}

function connection(kind) {
  const el = $("conn");
  el.dataset.state = kind;
  el.textContent = CONNECTION_TEXT[kind] ?? kind;
}

function setRunning(run) {
  state.run = run;
  const active = Boolean(run && ACTIVE.has(run.status));
  $("stop").hidden = !active;
  $("send").disabled = active;
  $("main").dataset.run = run ? run.status : "none";
}

function reportError(err) {
  if (err instanceof ApiError && err.status === 401) return; // handled by signOut
  banner(err.message);
}

// -- sign-in ------------------------------------------------------------------------------------
function showSignin(message) {
  $("app").hidden = true;
  $("signin").hidden = false;
  const error = $("signin-error");
  error.textContent = message ?? "";
  error.hidden = !message;
  $("signin-token").focus();
}

function signOut(message) {
  state.follower?.stop();
  state.follower = null;
  sessionStorage.removeItem(TOKEN_KEY);
  state.api = null;
  state.conversationId = null;
  setRunning(null);
  view.reset(null);
  clear($("conversations"));
  showSignin(message);
}

async function signIn(token) {
  const api = new Api(token, null);
  const me = await api.me();
  api.onUnauthorized = (message) =>
    signOut(`Signed out: ${message || "the token is no longer valid"}.`);
  state.api = api;
  state.user = me.user;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  $("who").textContent = me.user;
  $("signout").hidden = !me.auth;
  $("signin").hidden = true;
  $("app").hidden = false;
  try { // signed in: a failure from here on is shown, it does not sign out
    await refreshList();
    await route();
  } catch (err) {
    reportError(err);
  }
}

// -- the conversation list ----------------------------------------------------------------------
async function refreshList() {
  if (!state.api) return;
  const limit = 50 + state.listOffset;
  const page = await state.api.conversations(0, limit);
  const list = clear($("conversations"));
  for (const c of page.conversations) list.append(listItem(c));
  $("conversations-empty").hidden = page.conversations.length > 0;
  $("more-conversations").hidden = page.next_offset === null;
}

function listItem(c) {
  const current = c.id === state.conversationId;
  // a first prompt is stored with the model's first answer: until then, the one being run
  const sending = current && state.run?.prompt ? state.run.prompt.trim() : "";
  const title = c.preview?.trim() || sending || "(no prompt yet)";
  const link = h("a", {
    href: `#c/${encodeURIComponent(c.id)}`,
    class: "conv-link",
    "aria-current": current ? "page" : null,
    title: `conversation ${c.id}`,
  },
  h("span", { class: "conv-preview", text: title }),
  h("span", { class: "sr-only", text: ", changed " }),
  h("span", { class: "conv-meta" },
    h("time", { datetime: c.updated_at, text: relativeTime(c.updated_at) }),
    c.forked_from ? h("span", { class: "forked", text: " · copy" }) : null));
  const del = h("button", {
    type: "button",
    class: "icon quiet delete",
    "aria-label": `Delete conversation “${title.slice(0, 40)}”`,
    title: "Delete",
    text: "×",
    onclick: () => confirmDelete(c.id, title),
  });
  return h("li", { class: current ? "current" : null, dataset: { id: c.id } }, link, del);
}

async function confirmDelete(id, title) {
  const dialog = $("confirm-dialog");
  $("confirm-text").textContent = `“${title.slice(0, 120)}” and its runs will be deleted. This cannot be undone.`;
  dialog.returnValue = "";
  dialog.showModal();
  await new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
  if (dialog.returnValue !== "confirm") return;
  try {
    await state.api.deleteConversation(id);
    toast("Conversation deleted.");
    if (state.conversationId === id) location.hash = "#new";
    await refreshList();
  } catch (err) {
    reportError(err);
  }
}

// -- opening a conversation ---------------------------------------------------------------------
function conversationFromHash() {
  const m = /^#c\/(.+)$/.exec(location.hash);
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return m[1]; // a malformed link: names no conversation (the page says so)
  }
}

async function route() {
  if (!state.api) return;
  closeSidebar();
  const id = conversationFromHash();
  if (id) await openConversation(id);
  else newChat();
}

function detach() {
  state.follower?.stop();
  state.follower = null;
  connection("idle");
}

function newChat() {
  detach();
  state.conversationId = null;
  setRunning(null);
  view.reset(null);
  view.empty("Ask anything. Answers stream in as they are written; a run goes on if you close the tab.");
  $("conv-title").textContent = "New chat";
  $("conv-details").hidden = true;
  banner(null);
  markCurrent();
  $("composer-input").focus();
}

function markCurrent() {
  for (const li of $("conversations").children) {
    const current = li.dataset.id === state.conversationId;
    li.classList.toggle("current", current);
    const link = li.querySelector("a");
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

async function openConversation(id) {
  detach();
  banner(null);
  const ticket = ++state.opening;
  state.conversationId = id;
  markCurrent();
  let runs, conversation;
  try {
    runs = await state.api.runs(id, 1);
    conversation = await state.api.conversation(id);
  } catch (err) {
    if (ticket !== state.opening) return;
    view.reset(null);
    if (err instanceof ApiError && err.status === 404) view.empty("This conversation does not exist (or is not yours).");
    else reportError(err);
    return;
  }
  if (ticket !== state.opening) return;
  const latest = runs.runs[0] ?? null;
  const active = latest && ACTIVE.has(latest.status) ? latest : null;
  view.reset(id);
  const first = conversation.messages.find((m) => m.role === "user");
  const firstText = first?.parts?.find((p) => p.type === "text")?.text;
  $("conv-title").textContent = firstText ? firstText.slice(0, 80) : "Conversation";
  showDetails(id, conversation.version, latest);
  view.renderStored(conversation.messages, {
    skipRunId: active?.id ?? null,
    compactions: conversation.compactions,
  });
  if (!conversation.messages.length && !active) view.empty("No messages yet.");
  if (latest && !active) lastWords(latest);
  setRunning(active);
  if (active) follow(active, 0);
}

function showDetails(id, version, run) {
  $("conv-details").hidden = false;
  const dl = clear($("conv-meta"));
  const rows = [["Conversation", id], ["Messages", version]];
  if (run) rows.push(["Latest run", run.id], ["Its status", run.status]);
  for (const [label, value] of rows) dl.append(h("dt", { text: label }), h("dd", {}, h("code", { text: String(value) })));
}

const RUN_END_TEXT = {
  canceled: "Stopped. What was written until then is kept.",
  interrupted: "Interrupted: the server stopped while this run was going on. What completed is kept.",
  failed: "The run failed. What completed is kept.",
};

function lastWords(run, detail) {
  const text = RUN_END_TEXT[run.status];
  if (text) view.note(run.status, detail ? `${text} (${detail})` : text);
}

// -- following a run ----------------------------------------------------------------------------
function follow(run, after) {
  detach();
  const cid = state.conversationId;
  const follower = new RunFollower(state.api, run.id, {
    after,
    onState: (kind) => {
      if (state.follower === follower) connection(kind);
    },
    onError: (message) => banner(message),
    onEvent: (event) => {
      if (state.follower !== follower) return;
      if (event.type === "run.started") run.prompt = event.prompt;
      if (event.type === "run.recovered") run.moved = true;
      view.event(event);
      if (event.type === "run.started" || (event.type === "message.completed" && event.message.role === "assistant")) {
        refreshList().catch(reportError); // the list shows the prompt from the start, then what is stored
      }
      if (event.type === "run.paused") setRunning({ ...run, status: "paused" });
      else if (event.type === "run.resumed") setRunning({ ...run, status: "running" });
      else if (event.type.startsWith("run.") && event.type !== "run.started") finished(run, event, cid);
    },
  });
  state.follower = follower;
  follower.run();
}

const MOVED_TEXT = "The server running this reply stopped; another one continued it from what was stored.";

const TERMINAL_STATUS = {
  "run.completed": "completed",
  "run.failed": "failed",
  "run.canceled": "canceled",
  "run.interrupted": "interrupted",
};

async function finished(run, event, cid) {
  const status = TERMINAL_STATUS[event.type];
  if (!status) return;
  if (state.conversationId !== cid) {
    setRunning(null);
    return;
  }
  // redraw from the store: what is stored is what counts (a stopped run's partial text included)
  try {
    const conversation = await state.api.conversation(cid);
    if (state.conversationId !== cid) return;
    view.reset(cid);
    view.renderStored(conversation.messages, { compactions: conversation.compactions });
    showDetails(cid, conversation.version, { id: run.id, status });
    const stored = conversation.messages.some((m) => m.runId === run.id && m.role === "user");
    if (!stored && run.prompt) {
      view.lostPrompt(run.prompt, () => {
        const box = $("composer-input");
        box.value = run.prompt;
        box.focus();
      });
    }
    if (run.moved) view.note("recovered", MOVED_TEXT); // the redraw keeps saying that the run moved
    lastWords({ status }, event.type === "run.failed" ? event.error?.message : null);
  } catch (err) {
    reportError(err);
  } finally {
    if (state.run?.id === run.id || state.conversationId === cid) setRunning(null);
  }
  refreshList().catch(reportError);
  $("composer-input").focus({ preventScroll: true });
}

async function send(prompt) {
  banner(null);
  let cid = state.conversationId;
  try {
    if (!cid) {
      cid = (await state.api.createConversation()).id;
      state.conversationId = cid;
      view.reset(cid);
      history.replaceState(null, "", `#c/${encodeURIComponent(cid)}`);
      $("conv-title").textContent = prompt.slice(0, 80);
    }
    const run = await state.api.startRun(cid, prompt);
    $("composer-input").value = "";
    setRunning(run);
    showDetails(cid, "…", run);
    follow(run, 0);
    refreshList().catch(reportError);
  } catch (err) {
    reportError(err);
  }
}

async function stop() {
  const run = state.run;
  if (!run) return;
  $("stop").disabled = true;
  try {
    await state.api.cancel(run.id);
  } catch (err) {
    reportError(err);
  } finally {
    $("stop").disabled = false;
  }
}

async function decide(pauseId, decisions) {
  const run = state.run;
  if (!run) throw new Error("no paused run");
  await state.api.decide(run.id, pauseId, decisions);
}

async function fork(atVersion) {
  const cid = state.conversationId;
  if (!cid) return;
  try {
    const copy = await state.api.fork(cid, atVersion);
    toast("Forked: you are now in a copy. The original is unchanged.");
    location.hash = `#c/${encodeURIComponent(copy.id)}`;
    await refreshList();
  } catch (err) {
    reportError(err);
  }
}

// -- the narrow layout's sidebar ----------------------------------------------------------------
function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  $("sidebar-toggle").setAttribute("aria-expanded", "false");
}

function toggleSidebar() {
  const open = !document.body.classList.contains("sidebar-open");
  document.body.classList.toggle("sidebar-open", open);
  $("sidebar-toggle").setAttribute("aria-expanded", String(open));
  if (open) $("new-chat").focus();
}

// -- start --------------------------------------------------------------------------------------
function wire() {
  view = new ConversationView($("messages"), { onFork: fork, onDecide: decide });
  $("signin-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const token = $("signin-token").value.trim();
    if (!token) {
      showSignin("Paste your API token first.");
      return;
    }
    try {
      await signIn(token);
      $("signin-token").value = "";
    } catch (err) {
      showSignin(err.status === 401 ? "That token is not valid (or was revoked)." : err.message);
    }
  });
  $("signout").addEventListener("click", () => signOut(null));
  $("new-chat").addEventListener("click", () => {
    if (location.hash === "#new") newChat();
    else location.hash = "#new";
  });
  $("more-conversations").addEventListener("click", () => {
    state.listOffset += 50;
    refreshList().catch(reportError);
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const prompt = $("composer-input").value;
    if (!prompt.trim() || $("send").disabled) return;
    send(prompt);
  });
  $("composer-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("sidebar-toggle").addEventListener("click", toggleSidebar);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("sidebar-open")) {
      closeSidebar();
      $("sidebar-toggle").focus();
    }
  });
  window.addEventListener("hashchange", () => route().catch(reportError));
  window.addEventListener("offline", () => { if (state.follower) connection("offline"); });
  setupImport({
    api: () => state.api,
    open: async (id) => {
      await refreshList();
      location.hash = `#c/${encodeURIComponent(id)}`;
    },
  });
}

async function start() {
  wire();
  const saved = sessionStorage.getItem(TOKEN_KEY);
  // with --no-auth the service answers without a token. A saved token is dropped only when the
  // service refuses it: while the service cannot be reached (restarting, network down) the page
  // keeps it and tries again.
  for (let delay = 1000; !state.api; delay = Math.min(delay * 2, 8000)) {
    try {
      await signIn(saved);
      return;
    } catch (err) {
      if (state.api) return; // signed in with the form meanwhile
      if (err.status === 401) {
        if (saved) sessionStorage.removeItem(TOKEN_KEY);
        showSignin(saved ? "Your saved token is no longer valid." : null);
        return;
      }
      const retry = saved && (err.status === 0 || err.status >= 500);
      showSignin(retry ? `${err.message}. Trying again…` : err.message);
      if (!retry) return;
      await sleep(delay);
    }
  }
}

start();
