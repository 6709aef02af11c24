// A small, safe Markdown renderer: it builds DOM nodes and puts every piece of text in the page
// as a text node. No HTML in the input is ever parsed (a "<script>" stays the characters
// "<script>"); links keep only http, https and mailto URLs; images become links (nothing is
// loaded from a URL the model wrote). Covered: paragraphs, line breaks, headings, emphasis,
// strong, strikethrough, inline code, fenced and indented code, block quotes, ordered and
// unordered (nested) lists, thematic breaks, links and autolinks.
//
// The text is untrusted (a model, a tool, an imported history), so the work is bounded: no
// regular expression here can backtrack over a long stretch, and every closing delimiter is
// looked up in an index of the text built once (a megabyte of "[[[[" or "``````" renders in
// linear time, not in minutes).

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const MAX_DEPTH = 8;

/** Markdown text -> a DocumentFragment. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  renderBlocks(String(text ?? "").replace(/\r\n?/g, "\n").split("\n"), fragment, 0);
  return fragment;
}

/** A URL the page may link to, or null. */
export function safeUrl(raw) {
  let url;
  try {
    url = new URL(raw.trim());
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})([\s\S]*)$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+([\s\S]*))?$/;
const RULE = /^ {0,3}((\*[ \t]*){3,}|(-[ \t]*){3,}|(_[ \t]*){3,})$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,6})([-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
const BLANK = /^\s*$/;

function renderBlocks(lines, parent, depth) {
  let i = 0;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) parent.append(paragraphNode(paragraph, depth));
    paragraph = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (BLANK.test(line)) {
      flush();
      i += 1;
    } else if ((m = fenceOf(line))) {
      flush();
      const fence = m.fence;
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence)) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end: a fence still streaming)
      parent.append(codeBlock(body.join("\n"), m.language));
    } else if (paragraph.length === 0 && /^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || BLANK.test(lines[i]))) {
        body.push(lines[i].replace(/^( {4}|\t)/, ""));
        i += 1;
      }
      while (body.length && BLANK.test(body[body.length - 1])) body.pop();
      parent.append(codeBlock(body.join("\n"), ""));
    } else if ((m = HEADING.exec(line))) {
      flush();
      const heading = document.createElement(`h${Math.min(m[1].length + 2, 6)}`);
      heading.className = "md-heading";
      inline(headingText(m[2] ?? ""), heading, depth);
      parent.append(heading);
      i += 1;
    } else if (RULE.test(line)) {
      flush();
      parent.append(document.createElement("hr"));
      i += 1;
    } else if (QUOTE.test(line)) {
      flush();
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i += 1;
      }
      const quote = document.createElement("blockquote");
      if (depth < MAX_DEPTH) renderBlocks(inner, quote, depth + 1);
      else quote.append(inner.join("\n"));
      parent.append(quote);
    } else if ((m = ITEM.exec(line)) && (paragraph.length === 0 || m[1].length === 0)) {
      flush();
      i = list(lines, i, parent, depth);
    } else {
      paragraph.push(line);
      i += 1;
    }
  }
  flush();
}

/** An opening code fence: its marker and the language of its info string, or null. */
function fenceOf(line) {
  const m = FENCE.exec(line);
  if (!m || (m[1][0] === "`" && m[2].includes("`"))) return null;
  return { fence: m[1], language: m[2].trim().split(/\s/, 1)[0] };
}

/** A heading's text without its optional closing run of #s (which must follow a space). */
function headingText(raw) {
  const text = raw.trimEnd();
  let end = text.length;
  while (end > 0 && text[end - 1] === "#") end -= 1;
  if (end === 0) return "";
  if (end < text.length && (text[end - 1] === " " || text[end - 1] === "\t")) return text.slice(0, end).trimEnd();
  return text;
}

function list(lines, start, parent, depth) {
  const first = ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const el = document.createElement(ordered ? "ol" : "ul");
  if (ordered) {
    const n = parseInt(first[2], 10);
    if (n !== 1) el.setAttribute("start", String(n));
  }
  let i = start;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3]];
    i += 1;
    // continuation lines: indented deeper than the marker, or a blank line followed by such
    while (i < lines.length) {
      const next = lines[i];
      const nested = ITEM.exec(next);
      if (nested && nested[1].length <= indent) break;
      if (BLANK.test(next)) {
        const after = lines[i + 1];
        if (after === undefined || !/^\s+\S/.test(after) || leading(after) <= indent) break;
      } else if (leading(next) <= indent && !nested) {
        if (body.length && !BLANK.test(body[body.length - 1])) {
          body.push(next); // a lazy continuation of the item's paragraph
          i += 1;
          continue;
        }
        break;
      }
      body.push(next.slice(Math.min(leading(next), indent + 2)));
      i += 1;
    }
    const item = document.createElement("li");
    if (depth < MAX_DEPTH) renderBlocks(body, item, depth + 1);
    else item.append(body.join("\n"));
    // a tight item renders its paragraph inline
    if (item.childElementCount >= 1 && item.firstElementChild.tagName === "P" && !body.some((l) => BLANK.test(l))) {
      const p = item.firstElementChild;
      p.replaceWith(...p.childNodes);
    }
    el.append(item);
    while (i < lines.length && BLANK.test(lines[i]) && ITEM.exec(lines[i + 1] ?? "")?.[1].length === indent) i += 1;
  }
  parent.append(el);
  return i;
}

function leading(line) {
  return line.length - line.trimStart().length;
}

function paragraphNode(lines, depth) {
  const p = document.createElement("p");
  lines.forEach((line, k) => {
    if (k > 0) p.append(document.createElement("br"));
    inline(line.trim(), p, depth);
  });
  return p;
}

function codeBlock(text, language) {
  const pre = document.createElement("pre");
  pre.className = "md-code";
  const code = document.createElement("code");
  if (language && /^[\w+#.-]{1,30}$/.test(language)) code.dataset.language = language;
  code.textContent = text;
  pre.append(code);
  return pre;
}

// -- inline ---------------------------------------------------------------------------------------
// At each character that may open something, one matcher is tried. None runs a regular
// expression from an opener to the end of the text: closers come from indexes of the text built
// once (Scan), so a line of a megabyte of "[[[[", "``````" or " **a **a" renders in linear time.
// Inside a link's label no other link is made (nor from a bare URL: its text is its label).
const ESCAPE = /\\([!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~])/y;
const AUTOLINK = /<((?:https?:\/\/|mailto:)[^\s<>]+)>/y;
const BARE_URL = /https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"*_~]/y;
const SPECIAL = /[\\`!\[<h*_~]/g;
const SPACE = /\s/;
const WORD = /\w/;

/** Indexes of one text, each built on first use. */
class Scan {
  constructor(text) {
    this.text = text;
    this.sorted = new Map();
    this.stops = new Map();
    this.tails = new Map();
    this.runs = null;
  }

  /** The first position >= from in the sorted list `name` (built by `make`), or -1. */
  first(name, make, from) {
    let list = this.sorted.get(name);
    if (!list) {
      list = make(this.text);
      this.sorted.set(name, list);
    }
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid] < from) lo = mid + 1;
      else hi = mid;
    }
    return lo < list.length ? list[lo] : -1;
  }

  /** The first position >= from whose character satisfies `stop` (the text's length if none). */
  next(name, stop, from) {
    let table = this.stops.get(name);
    if (!table) {
      const n = this.text.length;
      table = new Int32Array(n + 1);
      table[n] = n;
      for (let i = n - 1; i >= 0; i -= 1) table[i] = stop(this.text[i]) ? i : table[i + 1];
      this.stops.set(name, table);
    }
    return from >= table.length ? this.text.length : table[from];
  }
}

function positions(text, test) {
  const out = [];
  for (let i = 0; i < text.length; i += 1) if (test(i)) out.push(i);
  return out;
}

/** The starts of the text's runs of backticks, by run length (one pass). */
function backtickRuns(text) {
  const runs = new Map();
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] !== "`") continue;
    const start = i;
    while (text[i + 1] === "`") i += 1;
    const size = i - start + 1;
    if (!runs.has(size)) runs.set(size, []);
    runs.get(size).push(start);
  }
  return runs;
}

const nonSpace = (c) => c !== undefined && !SPACE.test(c);

/** Where a delimiter can close: not after a space; an `em` one not followed by its own char. */
function closers(delimiter, single) {
  return (text) => positions(text, (i) => text.startsWith(delimiter, i) && nonSpace(text[i - 1]) &&
    (!single || text[i + 1] !== delimiter));
}

/** "]" that are not escaped (an even number of backslashes before them). */
function labelEnds(text) {
  return positions(text, (i) => {
    if (text[i] !== "]") return false;
    let k = i;
    while (k > 0 && text[k - 1] === "\\") k -= 1;
    return (i - k) % 2 === 0;
  });
}

const endsUrl = (c) => c === ")" || c === ">" || SPACE.test(c);
const isQuote = (c) => c === '"';

/** After a label's "]" at `close`: `(url "title")`, as {url, end}, or null. Memoized per "]". */
function linkTail(scan, close) {
  if (scan.tails.has(close)) return scan.tails.get(close);
  const text = scan.text;
  let tail = null;
  if (text[close + 1] === "(") {
    let i = scan.next("non-space", nonSpace, close + 2);
    if (text[i] === "<") i += 1;
    const start = i;
    i = scan.next("url end", endsUrl, i);
    const end = i;
    if (text[i] === ">") i += 1;
    const title = scan.next("non-space", nonSpace, i);
    if (title > i && text[title] === '"') {
      const quote = scan.next("quote", isQuote, title + 1);
      if (quote < text.length) i = quote + 1;
    }
    i = scan.next("non-space", nonSpace, i);
    if (text[i] === ")") tail = { start, end, after: i + 1 };
  }
  scan.tails.set(close, tail);
  return tail;
}

function match(scan, pos, links) {
  const text = scan.text;
  const c = text[pos];
  const sticky = (re, kind) => {
    re.lastIndex = pos;
    const m = re.exec(text);
    return m ? { kind, length: m[0].length, m } : null;
  };
  if (c === "\\") return sticky(ESCAPE, "escape");
  if (c === "`") {
    let end = pos;
    while (text[end] === "`") end += 1;
    const size = end - pos;
    if (!scan.runs) scan.runs = backtickRuns(text);
    const close = scan.first(`code ${size}`, () => scan.runs.get(size) ?? [], end);
    if (close < 0) return { kind: "text", length: size }; // an unmatched run is text, all of it
    return { kind: "code", length: close + size - pos, value: text.slice(end, close) };
  }
  if (links && (c === "[" || (c === "!" && text[pos + 1] === "["))) {
    const open = c === "[" ? pos + 1 : pos + 2;
    const close = scan.first("label ends", labelEnds, open);
    const tail = close >= 0 ? linkTail(scan, close) : null;
    if (!tail) return null;
    return {
      kind: c === "[" ? "link" : "image",
      length: tail.after - pos,
      label: text.slice(open, close),
      url: text.slice(tail.start, tail.end),
    };
  }
  if (links && c === "<") return sticky(AUTOLINK, "autolink");
  if (links && c === "h") return sticky(BARE_URL, "url");
  if (c === "*" || c === "_" || c === "~") {
    if (text[pos + 1] === c && nonSpace(text[pos + 2])) { // **strong**, __strong__, ~~strike~~
      const delimiter = c + c;
      const close = scan.first(`close ${delimiter}`, closers(delimiter, false), pos + 3);
      if (close >= 0) {
        const kind = c === "~" ? "strike" : "strong";
        return { kind, length: close + 2 - pos, value: text.slice(pos + 2, close) };
      }
    }
    if (c === "~" || !nonSpace(text[pos + 1])) return null;
    if (c === "_" && WORD.test(text[pos - 1] ?? "")) return null; // intraword: snake_case stays text
    const close = scan.first(`close ${c}`, closers(c, true), pos + 2);
    if (close < 0) return null;
    return { kind: "em", length: close + 1 - pos, value: text.slice(pos + 1, close) };
  }
  return null;
}

function inline(text, parent, depth, links = true) {
  const scan = new Scan(text);
  let pos = 0;
  let plain = "";
  const flush = () => {
    if (plain) parent.append(plain);
    plain = "";
  };
  while (pos < text.length) {
    SPECIAL.lastIndex = pos;
    const found = SPECIAL.exec(text);
    if (!found) break;
    plain += text.slice(pos, found.index);
    pos = found.index;
    const token = match(scan, pos, links);
    if (!token || token.kind === "text") {
      const length = token ? token.length : 1;
      plain += text.slice(pos, pos + length);
      pos += length;
      continue;
    }
    flush();
    parent.append(inlineNode(token, text.slice(pos, pos + token.length), depth, links));
    pos += token.length;
  }
  plain += text.slice(pos);
  flush();
}

function inlineNode(token, source, depth, links) {
  const deeper = depth + 1;
  const nest = (tag, content) => {
    const el = document.createElement(tag);
    if (deeper < MAX_DEPTH) inline(content, el, deeper, links);
    else el.textContent = content;
    return el;
  };
  switch (token.kind) {
    case "escape":
      return document.createTextNode(token.m[1]);
    case "code": {
      const code = document.createElement("code");
      code.textContent = token.value.replace(/^ ([\s\S]*) $/, "$1");
      return code;
    }
    case "strong":
      return nest("strong", token.value);
    case "em":
      return nest("em", token.value);
    case "strike":
      return nest("del", token.value);
    case "autolink":
      return link(token.m[1], token.m[1], source, false, deeper);
    case "url":
      return link(token.m[0], token.m[0], source, false, deeper);
    case "link":
      return link(token.url, token.label, source, true, deeper);
    case "image":
      return link(token.url, `image: ${token.label || token.url}`, source, false, deeper);
    default:
      return document.createTextNode(source);
  }
}

/** A link to a safe URL (the label parsed as markdown without links), or the source as text. */
function link(url, label, source, parseLabel, depth) {
  const href = safeUrl(url);
  if (href === null) return document.createTextNode(source); // not a URL the page will follow
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  if (!label.trim()) a.textContent = href; // never a link without a name
  else if (parseLabel && depth < MAX_DEPTH) inline(label, a, depth, false);
  else a.textContent = label;
  a.title = href;
  return a;
}
