// A small, safe Markdown renderer: it builds DOM nodes and puts every piece of text in the page
// as a text node. No HTML in the input is ever parsed (a "<script>" stays the characters
// "<script>"); links keep only http, https and mailto URLs; images become links (nothing is
// loaded from a URL the model wrote). Covered: paragraphs, line breaks, headings, emphasis,
// strong, strikethrough, inline code, fenced and indented code, block quotes, ordered and
// unordered (nested) lists, thematic breaks, links and autolinks.

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

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
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
    } else if ((m = FENCE.exec(line))) {
      flush();
      const fence = m[1];
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence)) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end: a fence still streaming)
      parent.append(codeBlock(body.join("\n"), m[2]));
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
      inline(m[2] ?? "", heading, depth);
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
const INLINE = [
  { kind: "escape", re: /\\([!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~])/y },
  { kind: "code", re: /(`+)([\s\S]*?[^`])\1(?!`)/y },
  { kind: "image", re: /!\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/y },
  { kind: "link", re: /\[((?:[^\]\\]|\\.)*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/y },
  { kind: "autolink", re: /<((?:https?:\/\/|mailto:)[^\s<>]+)>/y },
  { kind: "url", re: /https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"*_~]/y },
  { kind: "strong", re: /(\*\*|__)(?=\S)([\s\S]*?\S)\1/y },
  { kind: "strike", re: /~~(?=\S)([\s\S]*?\S)~~/y },
  { kind: "em", re: /(\*|_)(?=\S)([\s\S]*?\S)\1(?!\1)/y },
];
const SPECIAL = /[\\`!\[<h*_~]/g;

function inline(text, parent, depth) {
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
    const matched = matchAt(text, pos);
    if (!matched || (matched.kind === "em" && text[pos] === "_" && /\w/.test(text[pos - 1] ?? ""))) {
      plain += text[pos];
      pos += 1;
      continue;
    }
    flush();
    parent.append(inlineNode(matched, depth));
    pos += matched.m[0].length;
  }
  plain += text.slice(pos);
  flush();
}

function matchAt(text, pos) {
  for (const { kind, re } of INLINE) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (m) return { kind, m };
  }
  return null;
}

function inlineNode({ kind, m }, depth) {
  const deeper = depth + 1;
  const nest = (tag, content) => {
    const el = document.createElement(tag);
    if (deeper < MAX_DEPTH) inline(content, el, deeper);
    else el.textContent = content;
    return el;
  };
  switch (kind) {
    case "escape":
      return document.createTextNode(m[1]);
    case "code": {
      const code = document.createElement("code");
      code.textContent = m[2].replace(/^ (.*) $/, "$1");
      return code;
    }
    case "strong":
      return nest("strong", m[2]);
    case "em":
      return nest("em", m[2]);
    case "strike":
      return nest("del", m[1]);
    case "autolink":
    case "url":
      return link(m[kind === "url" ? 0 : 1], m[kind === "url" ? 0 : 1], deeper);
    case "link":
      return link(m[2], m[1], deeper, m[0]);
    case "image":
      return link(m[2], `image: ${m[1] || m[2]}`, deeper, m[0]);
    default:
      return document.createTextNode(m[0]);
  }
}

function link(url, label, depth, source) {
  const href = safeUrl(url);
  if (href === null) {
    // not a URL the page will follow: show what was written, as text
    return document.createTextNode(source ?? label);
  }
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  if (depth < MAX_DEPTH) inline(label, a, depth);
  else a.textContent = label;
  a.title = href;
  return a;
}
