// Import: a pasted or uploaded history goes to the server, which converts and sanitizes it; the
// report of what it did is shown before the conversation opens.

import { $, clear, h } from "./dom.js";

function describeRepair(repair) {
  const call = (c) => `tool call ${c.call_id ?? "(no id)"} (${c.name || "?"})`;
  return [
    ...(repair.synthesized ?? []).map((c) =>
      `Message ${c.message}: ${call(c)} had no result: a synthesized \u201cinterrupted\u201d result was added.`),
    ...(repair.dropped ?? []).map((c) => `Message ${c.message}: the result of ${call(c)} was dropped (${c.reason}).`),
    ...(repair.removed ?? []).map((i) => `Tool message ${i} was removed: nothing was left in it.`),
    ...(repair.truncated ?? []).map((c) =>
      `Message ${c.message}: the arguments of ${call(c)} are not a complete JSON object (kept as written).`),
    ...(repair.unpaired ?? []).map((c) => `Message ${c.message}: ${call(c)} is unpaired (${c.reason}).`),
  ];
}

/** The ImportOut body as a list a person can read. */
export function reportNode(out) {
  const s = out.sanitize ?? {};
  const items = [];
  const section = (title, lines, kind) => {
    if (!lines.length) return;
    items.push(h("h4", { text: title }), h("ul", { class: `report-list ${kind}`, dataset: { kind } },
      lines.map((text) => h("li", { text }))));
  };
  section("System prompts dropped", s.system_prompts ? [
    `${s.system_prompts} system message${s.system_prompts === 1 ? "" : "s"} dropped: a history from outside cannot set the agent's instructions.`,
  ] : [], "system");
  section("Unsafe URLs dropped", (s.unsafe_parts ?? []).map((u) =>
    `Message ${u.message}, part ${u.part}${u.content !== null && u.content !== undefined ? `, content ${u.content}` : ""}: ` +
    `${u.kind} with a ${u.scheme ? `\u201c${u.scheme}:\u201d` : "scheme-less"} URL.`), "unsafe");
  section("Messages removed", (s.removed ?? []).map((i) => `Message ${i} was left empty by the drops above.`), "removed");
  section("Repairs", s.repair ? describeRepair(s.repair) : [], "repair");
  section("Not carried by the format", (out.losses ?? []).map((l) =>
    `Message ${l.message}${l.part !== null && l.part !== undefined ? `, part ${l.part}` : ""}: ${l.what} ${l.kind} (${l.reason}).`), "losses");
  const summary = h("p", { class: "report-summary" },
    `${out.messages} message${out.messages === 1 ? "" : "s"} imported. `,
    s.changed || (out.losses ?? []).length ? "The server changed what you sent:" : "Nothing had to change.");
  return [summary, ...items];
}

export function setupImport({ api, open }) {
  const dialog = $("import-dialog");
  const form = $("import-form");
  const error = $("import-error");
  const report = $("import-report");
  let imported = null;

  const reset = () => {
    imported = null;
    error.hidden = true;
    report.hidden = true;
    clear($("import-report-body"));
    $("import-open").hidden = true;
    $("import-submit").hidden = false;
    $("import-submit").disabled = false;
  };
  const fail = (text) => {
    error.textContent = text;
    error.hidden = false;
  };

  $("open-import").addEventListener("click", () => {
    reset();
    form.reset();
    dialog.showModal();
    $("import-format").focus();
  });
  $("import-cancel").addEventListener("click", () => dialog.close());
  $("import-file").addEventListener("change", async () => {
    const file = $("import-file").files?.[0];
    if (!file) return;
    if (file.size > 24 * 1024 * 1024) {
      fail("That file is over 24 MiB, the service's limit for a request.");
      return;
    }
    $("import-text").value = await file.text();
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    reset();
    let data;
    try {
      data = JSON.parse($("import-text").value);
    } catch (err) {
      fail(`This is not JSON: ${err.message}`);
      return;
    }
    $("import-submit").disabled = true;
    try {
      imported = await api().importHistory($("import-format").value, data);
    } catch (err) {
      $("import-submit").disabled = false;
      fail(err.message);
      return;
    }
    $("import-report-body").replaceChildren(...reportNode(imported));
    report.hidden = false;
    $("import-submit").hidden = true;
    $("import-open").hidden = false;
    report.focus();
  });
  $("import-open").addEventListener("click", async () => {
    if (!imported) return;
    dialog.close();
    await open(imported.id);
  });
}
