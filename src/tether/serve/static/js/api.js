// The HTTP API of `tether serve`, and run event streams read with fetch (not EventSource: an
// EventSource cannot send the Authorization header, and the token never goes in a URL).

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

/**
 * One path segment for an id. The URL parser resolves "." and ".." segments (encoded or not),
 * so `/v1/conversations/..` would reach `/v1/`: such an id names nothing here.
 */
export function segment(id) {
  const text = String(id);
  if (text === "." || text === ".." || text === "") throw new ApiError(404, "not_found", `there is no ${JSON.stringify(text)} here`);
  return encodeURIComponent(text);
}

export class Api {
  constructor(token, onUnauthorized) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
  }

  headers(extra = {}) {
    const out = { ...extra };
    if (this.token) out.Authorization = `Bearer ${this.token}`;
    return out;
  }

  async request(method, path, body) {
    const init = { method, headers: this.headers(), cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, "network", `the server cannot be reached (${err.message})`);
    }
    if (response.status === 204) return null;
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) {
      const error = data?.error ?? {};
      if (response.status === 401) this.onUnauthorized?.(error.message);
      throw new ApiError(response.status, error.type ?? "error", error.message ?? `HTTP ${response.status}`);
    }
    return data;
  }

  me() { return this.request("GET", "/v1/me"); }
  conversations(offset = 0, limit = 50) {
    return this.request("GET", `/v1/conversations?limit=${limit}&offset=${offset}`);
  }
  createConversation() { return this.request("POST", "/v1/conversations"); }
  deleteConversation(id) { return this.request("DELETE", `/v1/conversations/${segment(id)}`); }
  fork(id, atVersion) {
    return this.request("POST", `/v1/conversations/${segment(id)}/fork`, { at_version: atVersion });
  }
  importHistory(format, data) { return this.request("POST", "/v1/conversations/import", { format, data }); }
  runs(id, limit = 1) {
    return this.request("GET", `/v1/conversations/${segment(id)}/runs?limit=${limit}`);
  }
  startRun(id, prompt) {
    return this.request("POST", `/v1/conversations/${segment(id)}/runs`, { prompt });
  }
  run(runId) { return this.request("GET", `/v1/runs/${segment(runId)}`); }
  cancel(runId) { return this.request("POST", `/v1/runs/${segment(runId)}/cancel`); }
  decide(runId, pauseId, decisions) {
    return this.request("POST", `/v1/runs/${segment(runId)}/decisions`, {
      pause_id: pauseId,
      decisions,
    });
  }

  /** Every message of a conversation (all pages), its version and its compaction records. */
  async conversation(id) {
    const messages = [];
    let offset = 0;
    let version = 0;
    for (;;) {
      const page = await this.request(
        "GET", `/v1/conversations/${segment(id)}?offset=${offset}&limit=1000`);
      messages.push(...page.messages);
      version = page.version;
      if (page.next_offset === null || page.next_offset === undefined) break;
      offset = page.next_offset;
    }
    const { compactions } = await this.request("GET", `/v1/conversations/${segment(id)}/compactions`);
    return { id, version, messages, compactions };
  }
}

const TERMINAL = new Set(["run.completed", "run.failed", "run.canceled", "run.interrupted"]);
const QUIET_LIMIT_MS = 40_000; // the server sends a comment every 15 s: silence this long is a dead link

/**
 * Follows one run's events. Reconnects by itself after a dropped connection, with
 * `Last-Event-ID` = the last event it got, so nothing is missed or seen twice. `onState` hears
 * "connecting", "live", "reconnecting", "offline" and "ended".
 */
export class RunFollower {
  constructor(api, runId, { after = 0, onEvent, onState, onError }) {
    this.api = api;
    this.runId = runId;
    this.last = after;
    this.onEvent = onEvent;
    this.onState = onState ?? (() => {});
    this.onError = onError ?? (() => {});
    this.controller = new AbortController();
    this.done = false;
    this.wake = null;
    this.onOnline = () => this.wake?.();
    window.addEventListener("online", this.onOnline);
  }

  stop() {
    this.controller.abort();
    window.removeEventListener("online", this.onOnline);
  }

  get stopped() { return this.controller.signal.aborted; }

  async run() {
    let delay = 250;
    let attempt = 0;
    while (!this.done && !this.stopped) {
      this.onState(attempt === 0 ? "connecting" : "reconnecting");
      let status;
      try {
        status = await this.connect(() => { delay = 250; });
      } catch (err) {
        status = this.stopped ? "stopped" : "dropped";
        if (!this.stopped) console.info(`run ${this.runId}: stream dropped (${err.message})`);
      }
      if (status === "fatal" || this.stopped) break;
      if (this.done) break;
      attempt += 1;
      this.onState(navigator.onLine === false ? "offline" : "reconnecting");
      await this.pause(delay);
      delay = Math.min(delay * 2, 4000);
    }
    window.removeEventListener("online", this.onOnline);
    if (this.done) this.onState("ended");
  }

  pause(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.controller.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      this.wake = done;
      signal.addEventListener("abort", done, { once: true });
    });
  }

  async connect(onOpen) {
    const attempt = new AbortController();
    const stopAttempt = () => attempt.abort();
    this.controller.signal.addEventListener("abort", stopAttempt, { once: true });
    let watchdog = null;
    const kick = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => attempt.abort(), QUIET_LIMIT_MS);
    };
    try {
      kick();
      const response = await fetch(`/v1/runs/${segment(this.runId)}/events`, {
        headers: this.api.headers({ "Last-Event-ID": String(this.last), Accept: "text/event-stream" }),
        cache: "no-store",
        signal: attempt.signal,
      });
      if (!response.ok) {
        let message = `HTTP ${response.status}`;
        try { message = (await response.json()).error.message; } catch { /* not JSON */ }
        if (response.status === 401) this.api.onUnauthorized?.(message);
        if (response.status < 500) {
          this.onError(message);
          return "fatal";
        }
        return "dropped";
      }
      this.onState("live");
      onOpen();
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        kick();
        buffer += value;
        let cut;
        while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
          this.dispatch(block);
          if (this.done) {
            attempt.abort();
            return "ended";
          }
        }
      }
      return "dropped"; // the server closed the stream before the run's last event
    } finally {
      clearTimeout(watchdog);
      this.controller.signal.removeEventListener("abort", stopAttempt);
    }
  }

  dispatch(block) {
    let id = null;
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    const seq = Number(id);
    if (id !== null && Number.isInteger(seq)) {
      if (seq <= this.last) return; // already seen (never expected: the server resumes after it)
      this.last = seq;
    }
    const event = JSON.parse(data.join("\n"));
    if (TERMINAL.has(event.type)) this.done = true;
    this.onEvent(event, seq);
  }
}
