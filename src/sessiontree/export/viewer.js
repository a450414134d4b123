// The session viewer of `sessiontree export --format html`.
//
// Reads the two JSON blocks of the page (the index: tree structure and previews; the entries),
// draws the tree as a virtual list (only the rows on screen exist in the DOM, so a session of a
// hundred thousand entries scrolls like a small one), and shows the context of the selected
// entry, computed here with the same rules as sessiontree's `Session.build_context`.
//
// Everything from the session is untrusted: markup is only ever built from `esc()`aped text,
// Markdown is rendered from escaped text, and links are kept only for http(s) addresses.
(function () {
  "use strict";

  const ROW = 22; // px, must match --row in the stylesheet
  const MAX_MESSAGES = 300; // messages drawn at once; older ones behind a button
  const MAX_TEXT = 20000; // characters of a tool result drawn before "show all"
  const IMAGE_CHARS = 4800; // Pi's token estimate counts an image as this many characters

  const $ = (id) => document.getElementById(id);
  const timing = {};
  const mark = (what) => { timing[what] = Math.round(performance.now()); document.body.dataset.timing = JSON.stringify(timing); };
  const IX = JSON.parse($("st-index").textContent);
  const N = IX.ids.length;
  const ids = IX.ids, parent = IX.parent, kind = IX.kind, role = IX.role;
  const T = IX.typeCodes, R = IX.roleCodes;
  const TYPE_NAME = {};
  for (const name in T) TYPE_NAME[T[name]] = name;
  const ROLE_NAME = {};
  for (const name in R) ROLE_NAME[R[name]] = name;
  const posOf = new Map();
  for (let i = 0; i < N; i++) posOf.set(ids[i], i);
  // The entries arrive in two blocks after this script: first those the context of the entry the
  // page opens at is made of (so it can be shown at once), then all the others, which take a big
  // session's page seconds to parse. `have` marks what has arrived.
  const ENTRIES = new Array(N); // null: a line of the file that could not be read
  const have = new Uint8Array(N);
  let full = false;
  let pendingSearch = null; // [query, step] asked before every entry arrived: run once they have

  function entries() {
    return ENTRIES;
  }

  function readBlock(id, fill) {
    const el = $(id);
    if (!el) return;
    fill(JSON.parse(el.textContent));
    el.textContent = ""; // the parsed copy is enough; halve the memory held
  }

  function readPath() {
    readBlock("st-path", (block) => {
      block.positions.forEach((pos, k) => { ENTRIES[pos] = block.entries[k]; have[pos] = 1; });
    });
  }

  function readAll() {
    readBlock("st-entries", (all) => {
      for (let i = 0; i < N; i++) if (!have[i]) ENTRIES[i] = all[i];
    });
    have.fill(1);
    full = true;
    if (pendingSearch !== null) { const [query, step] = pendingSearch; pendingSearch = null; search(query, step); }
  }

  // Whether the context of `i` can be shown: its bounded path and the entries its state comes
  // from have arrived.
  function covered(i) {
    if (full) return true;
    for (const k of contextPath(i)) if (!have[k]) return false;
    for (const k of statePositions(i)) if (k >= 0 && !have[k]) return false;
    return true;
  }

  // --- text helpers -------------------------------------------------------------------------

  function esc(value) {
    return String(value).replace(/[&<>"']/g, (c) =>
      c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : c === '"' ? "&quot;" : "&#39;");
  }

  // Control, bidi and invisible characters drawn as visible stand-ins (as the terminal app does).
  // With the `u` flag a surrogate range matches only lone surrogates (half an emoji, as a cut
  // can leave it), never a pair.
  const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb\ud800-\udfff]/gu;
  // What a zero-width joiner may join and stay a joiner (👩‍💻), as sessiontree/display.py has it:
  // anywhere else it is an invisible character, shown. Shown always, it split such emoji (QA).
  // (By code point: Chromium 156 missed `[\u{1F000}-\u{1FAFF}]$` at a string's end.)
  const emojiSide = (cp) => cp !== undefined && ((cp >= 0x1F000 && cp <= 0x1FAFF) ||
    (cp >= 0x2600 && cp <= 0x27BF) || cp === 0xFE0F);
  function before(s, at) { // the code point that ends at `at`
    const low = s.charCodeAt(at - 1);
    return low >= 0xDC00 && low <= 0xDFFF && at >= 2 ? s.codePointAt(at - 2) : s.codePointAt(at - 1);
  }
  function inert(text) {
    return String(text).replace(HIDDEN, (ch, at, whole) => {
      if (ch === "\u200d" && at > 0 && emojiSide(before(whole, at)) && emojiSide(whole.codePointAt(at + 1))) return ch;
      const code = ch.charCodeAt(0);
      if (ch === "\u001b") return "␛";
      if (code < 0x20) return String.fromCharCode(0x2400 + code);
      return "⟨U+" + code.toString(16).toUpperCase().padStart(4, "0") + "⟩";
    });
  }
  const safe = (text) => esc(inert(text));

  function contentText(content) {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return "";
    const parts = [];
    for (const b of content) {
      if (typeof b === "string") parts.push(b);
      else if (b && b.type === "text" && typeof b.text === "string") parts.push(b.text);
    }
    return parts.join("\n");
  }

  function images(content) {
    if (!Array.isArray(content)) return [];
    return content.filter((b) => b && b.type === "image");
  }

  function jsonText(value, indent) {
    try {
      return JSON.stringify(value, null, indent) ?? "";
    } catch (e) {
      return "<value too large or too deeply nested to show>";
    }
  }

  // --- Markdown, from escaped text ----------------------------------------------------------

  function inline(text) {
    // Code spans first, their content shown literally; each stands in the text as a NUL-fenced
    // number while emphasis is found (`safe` has made any NUL of the text a visible ␀), so a
    // bold phrase holding a code span is bold: `**the `x` flag**` showed its asterisks (QA).
    const out = [], codes = [];
    const span = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g;
    let last = 0, m;
    while ((m = span.exec(text)) !== null) {
      out.push(safe(text.slice(last, m.index)));
      out.push("\u0000" + codes.length + "\u0000");
      codes.push("<code>" + safe(m[2]) + "</code>");
      last = span.lastIndex;
    }
    out.push(safe(text.slice(last)));
    return emphasis(out.join("")).replace(/\u0000(\d+)\u0000/g, (all, k) => codes[Number(k)]);
  }

  // Links, bold and italics in text already made safe. A link stands in the text as a
  // \u0001-fenced number while bold and italics are found (`safe` has made any control
  // character of the text visible), its label styled on its own: the rules for `*` and `_`
  // rewrote addresses (`?q=_x_` became `?q=<em>x</em>`, `/**/` a <strong>; QA).
  function emphasis(s) {
    const links = [];
    s = s.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()]+)\)/g, (all, label, url) => {
      links.push([label, url]);
      return "\u0001" + (links.length - 1) + "\u0001";
    });
    return styled(s).replace(/\u0001(\d+)\u0001/g, (all, k) => {
      const [label, url] = links[Number(k)];
      return '<a href="' + url + '" rel="noopener noreferrer nofollow" target="_blank">' + styled(label) + "</a>";
    });
  }

  function styled(s) {
    s = s.replace(/~~([^~\n]+)~~/g, "<del>$1</del>"); // struck through, as the app draws it
    s = s.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
    s = s.replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?!\w)/g, "$1<em>$2</em>");
    // `_a_` too, but not inside snake_case words nor after "/" (a path)
    s = s.replace(/(^|[^_\w\/])_([^_\s][^_\n]*?)_(?![\w\/])/g, "$1<em>$2</em>");
    return s;
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
  const LIST = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

  // A GitHub table: a header row, a rule of dashes (colons give the alignment), the rows.
  const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  function cells(line) {
    const parts = line.trim().replace(/^\|/, "").replace(/(^|[^\\])\|$/, "$1").split(/(?<!\\)\|/);
    return parts.map((c) => c.trim().replace(/\\\|/g, "|"));
  }

  function markdown(src) {
    const lines = String(src).replace(/\r\n?/g, "\n").split("\n");
    const out = [];
    let i = 0;
    const isBlockStart = (line) => FENCE.test(line) || /^#{1,6}\s/.test(line) || /^\s*>/.test(line) || LIST.test(line);
    while (i < lines.length) {
      const line = lines[i];
      let m = FENCE.exec(line);
      if (m) {
        const fence = m[1];
        const body = [];
        i++;
        while (i < lines.length) {
          const c = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[i]);
          if (c && c[1][0] === fence[0] && c[1].length >= fence.length) { i++; break; }
          body.push(lines[i]);
          i++;
        }
        out.push("<pre><code>" + safe(body.join("\n")) + "</code></pre>");
        continue;
      }
      if (!line.trim()) { i++; continue; }
      if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
        const level = m[1].length;
        out.push("<h" + level + ">" + inline(m[2]) + "</h" + level + ">");
        i++;
        continue;
      }
      if (/^ {0,3}([-*_])( *\1){2,} *$/.test(line)) { out.push("<hr>"); i++; continue; }
      if (/^\s*>/.test(line)) {
        const body = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) { body.push(lines[i].replace(/^\s*> ?/, "")); i++; }
        out.push("<blockquote>" + markdown(body.join("\n")) + "</blockquote>");
        continue;
      }
      if ((m = LIST.exec(line))) {
        // Items at this list's indent; lines indented past it belong to the item above (a
        // nested list, a continued line), rendered as Markdown of their own: nested lists
        // were flattened into one level (QA).
        const ordered = /\d/.test(m[2]);
        const indent = m[1].length;
        const items = [];
        const sameList = (text) => {
          const item = LIST.exec(text);
          return item && item[1].length <= indent + 1 && /\d/.test(item[2]) === ordered ? item : null;
        };
        while (i < lines.length) {
          const item = sameList(lines[i]);
          if (item) { items.push([item[3]]); i++; continue; }
          // a blank line between two items keeps one list (numbered on, not from 1 again), and
          // so does one before an indented paragraph of the item above (QA)
          if (items.length && !lines[i].trim()) {
            let k = i;
            while (k < lines.length && !lines[k].trim()) k++;
            if (k < lines.length && sameList(lines[k])) { i = k; continue; }
            if (k < lines.length && lines[k].search(/\S/) > indent + 1 && !FENCE.test(lines[k])) {
              items[items.length - 1].push("");
              i = k;
              continue;
            }
          }
          if (items.length && lines[i].trim() && lines[i].search(/\S/) > indent + 1 && !FENCE.test(lines[i])) {
            items[items.length - 1].push(lines[i].slice(Math.min(lines[i].search(/\S/), indent + 2)));
            i++;
            continue;
          }
          break;
        }
        const tag = ordered ? "ol" : "ul";
        const first = ordered ? parseInt(m[2], 10) : 1;  // "5. five" is item 5, as the text says
        const open = first !== 1 ? '<ol start="' + first + '">' : "<" + tag + ">";
        const body = (t) => t.length === 1 ? inline(t[0]) : markdown(t.join("\n")).replace(/^<p>([\s\S]*?)<\/p>/, "$1");
        out.push(open + items.map((t) => "<li>" + body(t) + "</li>").join("") + "</" + tag + ">");
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && lines[i + 1].includes("|") && TABLE_RULE.test(lines[i + 1]) &&
          cells(lines[i + 1]).length === cells(line).length) {
        const align = cells(lines[i + 1]).map((c) => /^:-+:$/.test(c) ? "c" : /-:$/.test(c) ? "r" : "l");
        const row = (text, tag) => "<tr>" + align.map((a, k) => "<" + tag + ' class="al-' + a + '">' +
          inline(cells(text)[k] ?? "") + "</" + tag + ">").join("") + "</tr>";
        const body = [];
        let k = i + 2;
        while (k < lines.length && lines[k].includes("|") && lines[k].trim()) { body.push(row(lines[k], "td")); k++; }
        out.push('<div class="table"><table><thead>' + row(line, "th") + "</thead><tbody>" + body.join("") + "</tbody></table></div>");
        i = k;
        continue;
      }
      const para = [];
      while (i < lines.length && lines[i].trim() && !(para.length && isBlockStart(lines[i]))) { para.push(lines[i]); i++; }
      out.push("<p>" + para.map(inline).join("<br>") + "</p>");
    }
    return out.join("");
  }

  // --- the tree -----------------------------------------------------------------------------

  const firstChild = new Int32Array(N).fill(-1);
  const nextSibling = new Int32Array(N).fill(-1);
  const lastChild = new Int32Array(N).fill(-1);
  const roots = [];
  for (let i = 0; i < N; i++) {
    const p = parent[i];
    if (p < 0) { roots.push(i); continue; }
    if (lastChild[p] < 0) firstChild[p] = i; else nextSibling[lastChild[p]] = i;
    lastChild[p] = i;
  }
  const onPath = new Uint8Array(N);
  for (let i = IX.leaf; i >= 0; i = parent[i]) onPath[i] = 1;

  const HIDDEN_BY_DEFAULT = new Set(["label", "custom", "leaf", "thinking_level_change", "model_change",
    "active_tools_change", "session_info"].map((t) => T[t]));
  const labels = IX.labels;
  // Assistant turns that only call tools (no text, no error): hidden by the default and
  // no-tools filters but at the leaf, as in Pi's /tree, or labelled, as in the terminal app.
  const toolOnly = new Uint8Array(N);
  for (const i of IX.toolOnly || []) toolOnly[i] = 1;

  function visibility(filter) {
    const vis = new Uint8Array(N);
    for (let i = 0; i < N; i++) {
      let show;
      if (filter === "all") show = true;
      else if (filter === "user-only") show = role[i] === R.user;
      else if (filter === "labeled-only") show = Object.prototype.hasOwnProperty.call(labels, ids[i]);
      else show = !HIDDEN_BY_DEFAULT.has(kind[i]) && !(filter === "no-tools" && role[i] === R.toolResult)
        && (!toolOnly[i] || Object.prototype.hasOwnProperty.call(labels, ids[i]));
      vis[i] = show ? 1 : 0;
    }
    if ((filter === "default" || filter === "no-tools") && IX.leaf >= 0 && toolOnly[IX.leaf]) vis[IX.leaf] = 1;
    return vis;
  }

  // Rows as in the terminal app: at a fork the side branches come first, one step in, and the
  // child that continues the path being read stays in the fork's column.
  const view = { filter: "default", vis: null, folded: new Set(), rowsPos: [], rowsPrefix: [], prefixes: [""], rowOf: null,
    foldCounts: new Map() };

  function visibleChildren(i) {
    const out = [];
    const stack = [];
    for (let c = firstChild[i]; c >= 0; c = nextSibling[c]) stack.push(c);
    stack.reverse();
    while (stack.length) {
      const c = stack.pop();
      if (view.vis[c]) { out.push(c); continue; }
      const kids = [];
      for (let k = firstChild[c]; k >= 0; k = nextSibling[k]) kids.push(k);
      for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
    }
    return out;
  }

  function build() {
    view.vis = visibility(view.filter);
    const prefixIds = new Map([["", 0]]);
    const prefixes = [""];
    const pid = (text) => {
      let k = prefixIds.get(text);
      if (k === undefined) { k = prefixes.length; prefixIds.set(text, k); prefixes.push(text); }
      return k;
    };
    const rowsPos = [], rowsPrefix = [];
    const rowOf = new Int32Array(N).fill(-1);
    const stack = [];
    const pushFork = (kids, cont) => {
      let main = kids[kids.length - 1];
      for (const k of kids) if (onPath[k]) { main = k; break; }
      stack.push([main, pid(cont), cont]);
      const head = pid(cont + "├─ "), below = cont + "│  ";
      const sides = kids.filter((k) => k !== main);
      for (let s = sides.length - 1; s >= 0; s--) stack.push([sides[s], head, below]);
    };
    const visibleRoots = [];
    for (const r of roots) {
      if (view.vis[r]) visibleRoots.push(r); else visibleRoots.push(...visibleChildren(r));
    }
    if (visibleRoots.length) pushFork(visibleRoots, "");
    while (stack.length) {
      let [i, linePid, cont] = stack.pop();
      const contPid = pid(cont);
      for (;;) {
        rowOf[i] = rowsPos.length;
        rowsPos.push(i);
        rowsPrefix.push(linePid);
        if (view.folded.has(i)) break;
        const c = firstChild[i];
        let kids;
        if (c >= 0 && nextSibling[c] < 0 && view.vis[c]) kids = [c]; else kids = visibleChildren(i);
        if (kids.length === 1) { i = kids[0]; linePid = contPid; continue; }
        if (kids.length) pushFork(kids, cont);
        break;
      }
    }
    Object.assign(view, { rowsPos, rowsPrefix, prefixes, rowOf, foldCounts: new Map() });
    $("spacer").style.height = rowsPos.length * ROW + "px";
    drawn.clear();
    $("spacer").textContent = "";
    paint();
  }

  // Entries the filter shows below entry `i` (which a fold there hides), kept until the next build.
  function hiddenBelow(i) {
    let count = view.foldCounts.get(i);
    if (count !== undefined) return count;
    count = 0;
    const stack = [];
    for (let c = firstChild[i]; c >= 0; c = nextSibling[c]) stack.push(c);
    while (stack.length) {
      const c = stack.pop();
      count += view.vis[c];
      for (let k = firstChild[c]; k >= 0; k = nextSibling[k]) stack.push(k);
    }
    view.foldCounts.set(i, count);
    return count;
  }

  function rowFor(i) {
    for (; i >= 0; i = parent[i]) if (view.rowOf[i] >= 0) return view.rowOf[i];
    return -1;
  }

  const GLYPH = { user: "›", assistant: "‹", toolResult: "↳", bashExecution: "$", custom: "◆",
    compaction: "▤", branch_summary: "↩", custom_message: "◆", label: "⚑", session_info: "✎", leaf: "⇢",
    thinking_level_change: "◐", model_change: "◎", active_tools_change: "≡", customEntry: "◇", unknown: "?" };

  function glyph(i) {
    if (kind[i] === T.message) return GLYPH[ROLE_NAME[role[i]]] || GLYPH.unknown;
    if (kind[i] === T.custom) return GLYPH.customEntry;
    return GLYPH[TYPE_NAME[kind[i]]] || GLYPH.unknown;
  }

  const drawn = new Map(); // row -> element
  let selected = -1;
  let hits = new Set();

  function rowHtml(r) {
    const i = view.rowsPos[r];
    // a toggle where folding shows something: at forks (Space folds any entry)
    const foldable = view.folded.has(i) || visibleChildren(i).length > 1;
    const fold = foldable ? '<span class="fold on" data-fold="' + i + '">' + (view.folded.has(i) ? "▸" : "▾") + "</span>"
      : '<span class="fold"> </span>';
    const label = Object.prototype.hasOwnProperty.call(labels, ids[i]) ? '<span class="lb">[' + safe(labels[ids[i]]) + "]</span>" : "";
    // before the preview, which the row's width cuts: as the app's stub row, what the fold hides
    const below = view.folded.has(i) ? hiddenBelow(i) : -1;
    const stub = below >= 0 ? '<span class="stub">' + below.toLocaleString() + (below === 1 ? " entry" : " entries") + " folded</span>" : "";
    return '<span class="pre">' + esc(view.prefixes[view.rowsPrefix[r]]) + "</span>" + fold +
      '<span class="g">' + glyph(i) + "</span>" + label + stub + '<span class="pv">' + safe(IX.preview[i]) + "</span>";
  }

  function rowClass(r) {
    const i = view.rowsPos[r];
    let cls = "row";
    if (onPath[i]) cls += " path"; else cls += " off";
    if (i === IX.leaf) cls += " leaf";
    if (i === selected || (selected >= 0 && view.rowOf[selected] < 0 && rowFor(selected) === r)) cls += " sel";
    if (hits.has(i)) cls += " hit";
    return cls;
  }

  function paint() {
    const box = $("tree");
    const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 10);
    const last = Math.min(view.rowsPos.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + 10);
    for (const [r, el] of drawn) {
      if (r < first || r >= last) { el.remove(); drawn.delete(r); }
    }
    const spacer = $("spacer");
    for (let r = first; r < last; r++) {
      let el = drawn.get(r);
      if (!el) {
        el = document.createElement("div");
        el.dataset.row = r;
        el.dataset.i = view.rowsPos[r];
        el.dataset.id = inert(ids[view.rowsPos[r]]);
        el.style.top = r * ROW + "px";
        el.innerHTML = rowHtml(r);
        el.title = inert(ids[view.rowsPos[r]]);
        spacer.appendChild(el);
        drawn.set(r, el);
      }
      el.className = rowClass(r);
    }
  }

  function repaintRows() {
    for (const [r, el] of drawn) { el.innerHTML = rowHtml(r); el.className = rowClass(r); }
  }

  function scrollToRow(r) {
    if (r < 0) return;
    const box = $("tree");
    const top = r * ROW;
    if (top < box.scrollTop || top + ROW > box.scrollTop + box.clientHeight) {
      box.scrollTop = Math.max(0, top - box.clientHeight / 3);
    }
    paint();
  }

  // --- contexts (the rules of sessiontree's context.py) --------------------------------------

  function boundedPath(i) {
    const out = [];
    let marker = null;
    while (i >= 0) {
      out.push(i);
      if (marker !== null && ids[i] === marker) break;
      if (kind[i] === T.compaction) {
        const [firstKept, hasTail] = IX.compactions[i] || [null, false];
        if (hasTail) break;
        marker = firstKept;
      }
      i = parent[i];
    }
    return out.reverse();
  }

  // The path a context is cut from (Session._context_path): the bounded path, or the whole
  // root path when the newest compaction keeps from above the bounded path's start.
  function contextPath(i) {
    const path = boundedPath(i);
    let last = -1;
    for (let k = path.length - 1; k >= 0; k--) if (kind[path[k]] === T.compaction) { last = k; break; }
    if (last < 0) return path;
    const [firstKept, hasTail] = IX.compactions[path[last]] || [null, false];
    if (hasTail || firstKept === null) return path;
    for (let k = 0; k < last; k++) if (ids[path[k]] === firstKept) return path;
    const whole = [];
    for (let j = i; j >= 0; j = parent[j]) whole.push(j);
    whole.reverse();
    return whole.some((j) => ids[j] === firstKept) ? whole : path;
  }

  function selectIndices(path) {
    let last = -1;
    for (let k = path.length - 1; k >= 0; k--) if (kind[path[k]] === T.compaction) { last = k; break; }
    if (last < 0) return path.map((_, k) => k);
    const [firstKept, hasTail] = IX.compactions[path[last]] || [null, false];
    const after = [];
    for (let k = last + 1; k < path.length; k++) after.push(k);
    if (hasTail || firstKept === null) return [last, ...after];
    let start = last;
    for (let k = 0; k < last; k++) if (ids[path[k]] === firstKept) { start = k; break; }
    const kept = [];  // an older compaction in the kept range sends nothing (select_indices)
    for (let k = start; k < last; k++) if (kind[path[k]] !== T.compaction) kept.push(k);
    return [last, ...kept, ...after];
  }

  function isoMs(iso) {
    const t = Date.parse(iso);
    return Number.isFinite(t) ? t : 0;
  }

  // Context entries → [message, source position] pairs.
  function project(positions) {
    const out = [];
    const E = entries();
    for (const i of positions) {
      const e = E[i];
      if (!e) continue;
      if (e.type === "message") out.push([e.message, i]);
      else if (e.type === "custom_message") {
        out.push([{ role: "custom", customType: e.customType, content: e.content, display: e.display, timestamp: isoMs(e.timestamp) }, i]);
      } else if (e.type === "compaction") {
        out.push([{ role: "compactionSummary", summary: e.summary, tokensBefore: e.tokensBefore }, i]);
        if (Array.isArray(e.retainedTail)) for (const m of e.retainedTail) out.push([m, i]);
      } else if (e.type === "branch_summary" && e.summary) {
        out.push([{ role: "branchSummary", summary: e.summary, fromId: e.fromId }, i]);
      }
    }
    return out;
  }

  // The nearest thinking-level change, model source and tools change on the full root path.
  function statePositions(i) {
    let thinking = -1, model = -1, tools = -1;
    for (; i >= 0 && (thinking < 0 || model < 0 || tools < 0); i = parent[i]) {
      const k = kind[i];
      if (k === T.thinking_level_change) { if (thinking < 0) thinking = i; }
      else if (k === T.model_change || (k === T.message && role[i] === R.assistant)) { if (model < 0) model = i; }
      else if (k === T.active_tools_change && tools < 0) tools = i;
    }
    return [thinking, model, tools];
  }

  function deriveState(i) {
    const [thinking, model, tools] = statePositions(i);
    const E = entries();
    const state = { thinking: "off", model: null, tools: null };
    if (thinking >= 0 && E[thinking]) state.thinking = E[thinking].thinkingLevel;
    if (model >= 0 && E[model]) {
      const e = E[model];
      if (e.type === "model_change") state.model = e.provider + "/" + e.modelId;
      else if (typeof e.message.provider === "string" && typeof e.message.model === "string") state.model = e.message.provider + "/" + e.message.model;
    }
    if (tools >= 0 && E[tools]) state.tools = E[tools].activeToolNames;
    return state;
  }

  function blocksChars(content) {
    if (typeof content === "string") return content.length;
    if (!Array.isArray(content)) return 0;
    let chars = 0;
    for (const b of content) if (b && b.type === "text" && typeof b.text === "string") chars += b.text.length;
    return chars + IMAGE_CHARS * images(content).length;
  }

  function estimateTokens(m) {
    if (!m || typeof m !== "object") return 0;
    let chars = 0;
    const r = m.role;
    if (r === "user" || r === "custom" || r === "toolResult") chars = blocksChars(m.content);
    else if (r === "assistant") {
      if (typeof m.content === "string") chars = m.content.length;
      else if (Array.isArray(m.content)) {
        for (const b of m.content) {
          if (!b || typeof b !== "object") continue;
          if (b.type === "text" && typeof b.text === "string") chars += b.text.length;
          else if (b.type === "thinking" && typeof b.thinking === "string") chars += b.thinking.length;
          else if (b.type === "toolCall") chars += (typeof b.name === "string" ? b.name.length : 0) + jsonText(b.arguments).length;
        }
      }
    } else if (r === "bashExecution") chars = String(m.command ?? "").length + String(m.output ?? "").length;
    else if (r === "branchSummary" || r === "compactionSummary") chars = typeof m.summary === "string" ? m.summary.length : 0;
    else return 0;
    return Math.ceil(chars / 4);
  }

  function usageTotal(u) {
    if (!u || typeof u !== "object") return 0;
    if (typeof u.totalTokens === "number" && u.totalTokens > 0) return Math.trunc(u.totalTokens);
    let s = 0;
    for (const k of ["input", "output", "cacheRead", "cacheWrite"]) if (typeof u[k] === "number") s += u[k];
    return Math.trunc(s);
  }

  function contextTokens(messages) {
    for (let k = messages.length - 1; k >= 0; k--) {
      const m = messages[k];
      if (m && m.role === "assistant" && m.stopReason !== "aborted" && m.stopReason !== "error") {
        const total = usageTotal(m.usage);
        if (total > 0) {
          let rest = 0;
          for (const n of messages.slice(k + 1)) rest += estimateTokens(n);
          return total + rest;
        }
      }
    }
    let sum = 0;
    for (const m of messages) sum += estimateTokens(m);
    return sum;
  }

  function contextAt(i) {
    const path = contextPath(i);
    const chosen = selectIndices(path).map((k) => path[k]);
    return project(chosen);
  }

  // --- the main pane ------------------------------------------------------------------------

  // The address of entry `i`: its id, or `@position` for an id no URL can hold (a lone
  // surrogate, which Pi's files may contain).
  function fragment(i) {
    try {
      return encodeURIComponent(ids[i]);
    } catch (e) {
      return "@" + i;
    }
  }

  function link(i) {
    return '<a href="#' + esc(fragment(i)) + '">' + safe(ids[i]) + "</a>";
  }

  // Cut at the end of a line when one is in the last fifth of MAX_TEXT, said with what is left
  // (as the app says it): a cut in a line's middle, with nothing after it, read as the output's
  // end ("4221" then "42"), and a search's match in the part not shown was not said (QA).
  function cutText(text, key) {
    if (text.length <= MAX_TEXT || expanded.has(inert(key))) return "<pre>" + safe(text) + "</pre>";
    let end = text.lastIndexOf("\n", MAX_TEXT);
    if (end < MAX_TEXT * 0.8) end = MAX_TEXT;
    const shown = text.slice(0, end), hidden = text.slice(end).replace(/^\n/, "");
    const lines = hidden.split("\n").length - (hidden.endsWith("\n") ? 1 : 0);
    let said = "… " + lines.toLocaleString() + (lines === 1 ? " more line" : " more lines") +
      " (" + hidden.length.toLocaleString() + " characters)";
    if (lastQuery && !/(^|\s)re:/.test(lastQuery)) { // a regex is never run here: it may not end
      const matches = matcher(lastQuery), folded = (t) => t.normalize("NFC").toLowerCase();
      if (!matches(folded(shown)) && matches(folded(text))) said += ", the match among them";
    }
    return "<pre>" + safe(shown) + "</pre>" +
      '<button class="more" type="button" data-expand="' + safe(key) + '">' + safe(said) + " · show all</button>";
  }

  function imageNotes(content) {
    return images(content).map((b) => '<p class="note">[image' + (typeof b.mimeType === "string" ? ": " + safe(b.mimeType) : "") +
      (b.omittedBytes ? ", " + (b.omittedBytes < 1024 ? b.omittedBytes + " bytes" : Math.round(b.omittedBytes / 1024) + " KB") + ", not included in this page" : "") + "]</p>").join("");
  }

  // --- tool calls, as the terminal app's preview draws them (src/sessiontree/tui/preview.py) --
  // An edit as a diff, a write as the file, a command as a command, other arguments one per
  // line with their own line breaks: JSON escapes (`\n`, `\t`) in one wrapped line read badly.

  function textArg(args, ...names) {
    for (const n of names) if (typeof args[n] === "string") return args[n];
    return null;
  }

  function editPairs(args) {
    const old = textArg(args, "oldText", "old_string", "old_str");
    const neu = textArg(args, "newText", "new_string", "new_str");
    if (old !== null || neu !== null) return [[old || "", neu || ""]];
    if (!Array.isArray(args.edits) || !args.edits.length) return null;
    const pairs = [];
    for (const e of args.edits) {
      if (!e || typeof e !== "object") return null;
      pairs.push([textArg(e, "oldText", "old_string", "old_str") || "", textArg(e, "newText", "new_string", "new_str") || ""]);
    }
    return pairs;
  }

  const DIFF_CELLS = 250000; // lines × lines compared; a bigger edit is shown as removed then added

  function diffLines(old, neu) {
    if (old.endsWith("\n") && neu.endsWith("\n")) { old = old.slice(0, -1); neu = neu.slice(0, -1); }
    const a = old.split("\n"), b = neu.split("\n");
    if (a.length * b.length > DIFF_CELLS) return a.map((x) => ["-", x]).concat(b.map((x) => ["+", x]));
    // longest common subsequence of lines, from the end, then walked from the start
    const w = b.length + 1;
    const lcs = new Uint32Array((a.length + 1) * w);
    for (let i = a.length - 1; i >= 0; i--) {
      for (let j = b.length - 1; j >= 0; j--) {
        lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    const out = [];
    let i = 0, j = 0;
    while (i < a.length || j < b.length) {
      if (i < a.length && j < b.length && a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
      else if (i < a.length && (j >= b.length || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) { out.push(["-", a[i]]); i++; }
      else { out.push(["+", b[j]]); j++; }
    }
    // unchanged lines more than three away from a change: one "⋯"
    const near = out.map(() => false);
    out.forEach(([sign], k) => { if (sign !== " ") for (let d = -3; d <= 3; d++) if (out[k + d]) near[k + d] = true; });
    const kept = [];
    out.forEach((line, k) => {
      if (near[k]) kept.push(line);
      else if (!kept.length || kept[kept.length - 1][0] !== "⋯") kept.push(["⋯", ""]);
    });
    return kept;
  }

  const DIFF_CLASS = { " ": "ctx", "-": "del", "+": "add", "⋯": "hunk" };

  function editHtml(pairs) {
    let removed = 0, added = 0;
    const rows = [];
    pairs.forEach(([old, neu], k) => {
      if (k) rows.push('<span class="hunk">⋯</span>');
      for (const [sign, line] of diffLines(old, neu)) {
        removed += sign === "-";
        added += sign === "+";
        rows.push('<span class="' + DIFF_CLASS[sign] + '">' + safe(sign === "⋯" ? "⋯" : sign + " " + line) + "</span>");
      }
    });
    const counts = removed || added ? " (−" + removed + " +" + added + ")" : " (no change)";
    return [counts, '<pre class="diff">' + rows.join("\n") + "</pre>"];
  }

  function callHtml(b, key) {
    const name = typeof b.name === "string" ? b.name : "?";
    const raw = b.arguments;
    const args = raw && typeof raw === "object" && !Array.isArray(raw) ? raw : {};
    const path = textArg(args, "path", "file_path") || "";
    const shown = new Set(path ? ["path", "file_path"] : []);
    const kind = name.toLowerCase(); // Pi's tools are lower case; other harnesses spell them Edit, Write, Bash
    let head = '→ <span class="name">' + safe(name) + "</span>" + (path ? " <code>" + safe(path) + "</code>" : "");
    let body = "";
    const pairs = kind === "edit" || kind === "multiedit" ? editPairs(args) : null;
    if (pairs) {
      const [counts, diff] = editHtml(pairs);
      head += safe(counts);
      body = diff;
      for (const n of ["oldText", "newText", "old_string", "new_string", "old_str", "new_str", "edits"]) shown.add(n);
    } else if (kind === "write" && typeof args.content === "string") {
      const lines = args.content.split("\n").length - (args.content.endsWith("\n") ? 1 : 0);
      head += safe(" (" + lines.toLocaleString() + " lines)");
      body = cutText(args.content.replace(/\n$/, ""), key + ":content");
      shown.add("content");
    } else if (kind === "bash" && typeof args.command === "string") {
      body = cutText("$ " + args.command, key + ":command");
      shown.add("command");
    }
    if (raw !== undefined && raw !== null && args !== raw) body += cutText(jsonText(raw, 2), key + ":args");
    for (const [field, value] of Object.entries(args)) {
      if (shown.has(field)) continue;
      const text = typeof value === "string" ? value : jsonText(value);
      if (!text.includes("\n") && text.length <= 300) {
        body += '<div class="arg"><b>' + safe(field) + ":</b> " + safe(text) + "</div>";
      } else {
        body += '<div class="arg"><b>' + safe(field) + ":</b></div>" +
          cutText(typeof value === "string" ? value : jsonText(value, 2), key + ":" + field);
      }
    }
    return '<div class="call">' + head + (typeof b.id === "string" ? ' <span class="muted">' + safe(b.id) + "</span>" : "") + body + "</div>";
  }

  function messageHtml(m, source, key) {
    if (!m || typeof m !== "object") return '<div class="msg"><div class="who">?</div><pre>' + safe(jsonText(m, 2)) + "</pre></div>";
    const r = typeof m.role === "string" ? m.role : "?";
    let who = r, body = "", cls = r;
    if (r === "user") {
      body = '<div class="md">' + markdown(inert(contentText(m.content))) + "</div>" + imageNotes(m.content);
    } else if (r === "assistant") {
      who = "assistant" + (typeof m.model === "string" ? " · " + m.model : "");
      const parts = [];
      const content = typeof m.content === "string" ? [{ type: "text", text: m.content }] : Array.isArray(m.content) ? m.content : [];
      for (const b of content) {
        if (!b || typeof b !== "object") continue;
        if (b.type === "text" && typeof b.text === "string") parts.push('<div class="md">' + markdown(inert(b.text)) + "</div>");
        else if (b.type === "thinking" && typeof b.thinking === "string" && b.thinking.trim()) {
          parts.push('<details class="thinking"><summary>thinking</summary><div class="md">' + markdown(inert(b.thinking)) + "</div></details>");
        } else if (b.type === "toolCall") {
          parts.push(callHtml(b, key + ":" + b.id));
        }
      }
      if (m.stopReason === "error" || m.stopReason === "aborted") {
        cls += " err";
        parts.push('<p class="note">stopped (' + safe(m.stopReason) + ")" + (typeof m.errorMessage === "string" ? ": " + safe(m.errorMessage) : "") + "</p>");
      } else if (m.stopReason === "length") {  // as the app says it (display.CUT_AT_LIMIT)
        cls += " err";
        parts.push('<p class="note">stopped (length): the answer reached the model\'s output token limit</p>');
      }
      body = parts.join("");
    } else if (r === "toolResult") {
      who = "tool result · " + (typeof m.toolName === "string" ? m.toolName : "?");
      if (m.isError) { cls += " err"; who += " · error"; }
      body = cutText(contentText(m.content), key) + imageNotes(m.content);
    } else if (r === "bashExecution") {
      who = "shell command" + (m.cancelled ? " · cancelled"
        : m.exitCode !== undefined && m.exitCode !== null ? " · exit " + m.exitCode : "");
      body = cutText("$ " + String(m.command ?? "") + "\n" + String(m.output ?? ""), key);
      if (m.excludeFromContext) body += '<p class="note">excluded from what the model receives</p>';
    } else if (r === "custom") {
      who = "custom message · " + (typeof m.customType === "string" ? m.customType : "?");
      body = '<div class="md">' + markdown(inert(contentText(m.content))) + "</div>" + imageNotes(m.content);
    } else if (r === "branchSummary") {
      who = "branch summary";
      body = '<div class="md">' + markdown(inert(String(m.summary ?? ""))) + "</div>";
    } else if (r === "compactionSummary") {
      who = "compaction summary" + (typeof m.tokensBefore === "number" ? " · " + m.tokensBefore.toLocaleString() + " tokens before" : "");
      body = '<div class="md">' + markdown(inert(String(m.summary ?? ""))) + "</div>";
    } else {
      body = "<pre>" + safe(jsonText(m, 2)) + "</pre>";
    }
    return '<div class="msg ' + safe(cls) + '" data-role="' + safe(r) + '"><div class="who">' + safe(who) +
      (source >= 0 ? link(source) : "") + "</div>" + body + "</div>";
  }

  const expanded = new Set();
  let showAll = false;
  let renderedFor = -2; // the entry whose context the main pane shows (-2: none yet)

  function entryTitle(i) {
    const e = entries()[i];
    if (!e) return "unreadable entry";
    if (e.type === "message") return (e.message && e.message.role) || "message";
    return e.type;
  }

  function renderMain() {
    const main = $("main");
    renderedFor = -2;
    if (selected >= 0 && !covered(selected)) {
      main.innerHTML = '<p class="muted">Reading ' + N.toLocaleString() + " entries…</p>";
      return;
    }
    renderedFor = selected;
    if (selected < 0) {
      main.innerHTML = '<p class="muted">The session has no entries' + (N ? " on its active path (the leaf is before the first entry)" : "") + ". Pick one in the tree.</p>";
      main.dataset.selected = "";
      document.body.dataset.ready = "1";
      return;
    }
    const i = selected;
    const E = entries();
    const e = E[i];
    const messages = e ? contextAt(i) : [];
    const state = deriveState(i);
    const tokens = contextTokens(messages.map((p) => p[0]));
    const badges = (onPath[i] ? '<span class="badge path">active path</span>' : "") + (i === IX.leaf ? '<span class="badge leaf">leaf</span>' : "");
    const label = Object.prototype.hasOwnProperty.call(labels, ids[i]) ? " · label <b>" + safe(labels[ids[i]]) + "</b>" : "";
    const parts = [];
    parts.push('<div class="node"><h2>' + safe(entryTitle(i)) + " " + link(i) + badges + "</h2>" +
      '<div class="sub">' + (e ? safe(e.timestamp) : "") + label + (parent[i] >= 0 ? " · parent " + link(parent[i]) : "") + "</div>" +
      '<div class="state"><b>' + messages.length.toLocaleString() + "</b> messages · ~<b>" + tokens.toLocaleString() + "</b> tokens · model <b>" +
      safe(state.model || "(none)") + "</b> · thinking <b>" + safe(state.thinking) + "</b> · tools <b>" +
      safe(state.tools ? state.tools.join(", ") || "(none)" : "(default)") + "</b></div>" +
      (e ? "" : '<p class="note">This line of the session file could not be read.</p>') + "</div>");
    let start = 0;
    if (!showAll && messages.length > MAX_MESSAGES) {
      start = messages.length - MAX_MESSAGES;
      parts.push('<button class="more" type="button" data-all="1">show the ' + start.toLocaleString() + " earlier messages</button>");
    }
    if (!messages.length) parts.push('<p class="muted">The model sees nothing at this entry.</p>');
    for (let k = start; k < messages.length; k++) parts.push(messageHtml(messages[k][0], messages[k][1], i + ":" + k));
    if (e && !["message", "custom_message", "compaction", "branch_summary"].includes(e.type)) {
      parts.push('<p class="note">This ' + safe(e.type) + " entry itself adds nothing to the context; it is shown as stored:</p><pre>" + safe(jsonText(e, 2)) + "</pre>");
    }
    main.innerHTML = parts.join("");
    main.dataset.selected = inert(ids[i]);
    main.dataset.messages = String(messages.length);
    main.dataset.roles = inert(messages.map((p) => (p[0] && p[0].role) || "?").join(","));
    document.body.dataset.ready = "1";
  }

  function select(i, { scroll = true } = {}) {
    if (i !== selected) { expanded.clear(); showAll = false; }
    selected = i;
    // unfold the ancestors that hide it
    let unfolded = false;
    for (let p = parent[i]; p >= 0; p = parent[p]) if (view.folded.delete(p)) unfolded = true;
    if (unfolded) build();
    for (const [r, el] of drawn) el.className = rowClass(r);
    if (scroll) scrollToRow(rowFor(i));
    renderMain();
    $("main").scrollTop = $("main").scrollHeight;
  }

  function fromHash() {
    const raw = location.hash.slice(1);
    if (!raw) return false;
    let id;
    try { id = decodeURIComponent(raw); } catch (e) { id = raw; }
    let i = posOf.get(id);
    if (i === undefined && /^@\d+$/.test(id) && Number(id.slice(1)) < N) i = Number(id.slice(1));
    if (i === undefined) {
      $("main").innerHTML = '<p class="note">No entry ' + safe(id) + " in this session.</p>";
      renderedFor = selected;
      document.body.dataset.ready = "1";
      return true;
    }
    select(i);
    return true;
  }

  // --- search -------------------------------------------------------------------------------

  let haystack = null;
  let matchList = [], matchAt = -1, lastQuery = "";

  function entryText(i) {
    const e = entries()[i];
    if (!e) return "";
    const bits = [ids[i], IX.preview[i], labels[ids[i]] || ""];
    if (e.type === "message") {
      const m = e.message || {};
      if (m.role === "assistant" && Array.isArray(m.content)) {
        for (const b of m.content) {
          if (!b) continue;
          if (typeof b.text === "string") bits.push(b.text);
          if (typeof b.thinking === "string") bits.push(b.thinking);
          if (b.type === "toolCall") bits.push(String(b.name), jsonText(b.arguments));
        }
      } else bits.push(contentText(m.content), String(m.command ?? ""), String(m.output ?? ""), String(m.toolName ?? ""));
      if (m.role === "toolResult") {
        const call = callOf(i, m.toolCallId);
        if (call) bits.push(String(call.name), jsonText(call.arguments));
      }
    } else if (typeof e.summary === "string") bits.push(e.summary);
    else if (e.content !== undefined) bits.push(contentText(e.content));
    // no empty lines: an entry without a label searched as "…\n\n…", which `re:^$` matched
    return bits.filter((b) => b).join("\n").normalize("NFC").toLowerCase();
  }

  // Entries another writer may append between a tool call and its results (session.py's
  // WALKED_PAST), and how many results of one turn a call is looked for above.
  const WALKED_PAST = new Set(["label", "custom", "session_info", "model_change", "thinking_level_change",
    "active_tools_change"].map((t) => T[t]));
  const TOOL_CALL_SEARCH = 64;

  // The toolCall block that produced a tool result (`Session.tool_call_of`): a result's row is
  // drawn as its call, so the call's words find the row, as in the app.
  function callOf(i, callId) {
    let p = parent[i];
    for (let k = 0; k < TOOL_CALL_SEARCH && p >= 0; k++, p = parent[p]) {
      if (kind[p] === T.message && role[p] === R.assistant) {
        const m = (entries()[p] || {}).message || {};
        if (!Array.isArray(m.content)) return null;
        return m.content.find((b) => b && b.type === "toolCall" && b.id === callId) || null;
      }
      if (!(kind[p] === T.message && role[p] === R.toolResult) && !WALKED_PAST.has(kind[p])) return null;
    }
    return null;
  }

  // The app's search syntax (sessiontree/query.py): words must each appear, in any order;
  // "a phrase" with its spaces matching any run of whitespace (the rows show a tab or a line
  // break as a space); re:regex (re:"with spaces") a JavaScript regular expression, `^` and `$`
  // at each line. All ignoring case; an unfinished quote runs to the end. The texts searched
  // are composed (NFC) and so is the query: an accented letter typed finds it however the
  // file spells it, as `_literal` in query.py does.
  function matcher(query) {
    const tests = [];
    const token = /re:"([^"]*)"?|re:(\S*)|"([^"]*)"?|(\S+)/g;
    for (const m of query.matchAll(token)) {
      const pattern = m[1] ?? m[2];
      if (pattern !== undefined) {
        if (pattern) { const re = new RegExp(pattern, "im"); tests.push((text) => re.test(text)); }
      } else {
        const literal = (m[3] ?? m[4]).normalize("NFC").toLowerCase().trim();
        if (/\s/.test(literal)) {
          const spaced = literal.split(/\s+/).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("\\s+");
          const re = new RegExp(spaced);
          tests.push((text) => re.test(text));
        } else if (literal) tests.push((text) => text.includes(literal));
      }
    }
    const matches = (text) => tests.every((t) => t(text));
    matches.empty = !tests.length;  // a lone `"` or `re:`: nothing to find, not everything
    return matches;
  }

  // Entries matching the last query under any filter; `matchList` those the filter shows, as
  // the app's find goes over the rows drawn.
  let found = [];

  function search(query, step) {
    query = query.trim();
    if (!full) { pendingSearch = [query, step]; $("hits").textContent = "reading entries…"; return; }
    if (!query) { clearSearch(); return; }
    if (query !== lastQuery) {
      stopWorker(); // a regex still running answers a query no longer asked
      let matches;
      // the last query's highlights go with it: they stood beside "bad regex" (QA)
      try { matches = matcher(query); } catch (err) { clearSearch(); $("hits").textContent = "bad regex"; return; }
      if (matches.empty) { clearSearch(); $("hits").textContent = "nothing to find"; return; }
      if (haystack === null) { haystack = new Array(N); for (let i = 0; i < N; i++) haystack[i] = entryText(i); }
      // A regular expression may backtrack without end on one entry, which would hang the tab:
      // it runs in a worker that is stopped past REGEX_MOST_MS (the app gives up after 1 s).
      if (/(^|\s)re:/.test(query) && askWorker(query, step)) return;
      found = [];
      for (let i = 0; i < N; i++) if (matches(haystack[i])) found.push(i);
      takeFound(query);
    }
    stepMatch(step);
  }

  function takeFound(query) {
    lastQuery = query;
    matchAt = -1;
    matchList = found.filter((i) => view.vis[i]);
    hits = new Set(matchList);
    repaintRows();
  }

  function stepMatch(step) {
    if (!matchList.length) { $("hits").textContent = "no match"; return; }
    if (step) {
      matchAt = (matchAt + step + matchList.length) % matchList.length;
      go(matchList[matchAt]);
    }
    $("hits").textContent = (matchAt + 1) + "/" + matchList.length;
  }

  // A filter changed: the matches are those it shows, counted again from the first.
  function refilterMatches() {
    if (!lastQuery) return;
    takeFound(lastQuery);
    $("hits").textContent = matchList.length ? matchList.length + " found" : "no match";
  }

  function clearSearch() {
    stopWorker();
    hits = new Set();
    found = [];
    matchList = [];
    lastQuery = "";
    $("hits").textContent = "";
    repaintRows();
  }

  const REGEX_MOST_MS = 3000;
  const WORKER_SOURCE = "const matcher = " + matcher.toString() + ";\nlet texts = [];\n" +
    "onmessage = (ev) => {\n  if (ev.data.texts) { texts = ev.data.texts; return; }\n" +
    "  const m = matcher(ev.data.query), out = [];\n" +
    "  for (let i = 0; i < texts.length; i++) if (m(texts[i])) out.push(i);\n" +
    "  postMessage({ query: ev.data.query, found: out });\n};\n";
  let worker = null, workerUrl = null, asked = null;

  // False when no worker can be made (the search then runs here).
  function askWorker(query, step) {
    stopWorker();
    try {
      workerUrl = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
      worker = new Worker(workerUrl);
    } catch (err) {
      stopWorker();
      return false;
    }
    worker.onmessage = (ev) => {
      if (!asked || ev.data.query !== asked.query) return;
      const step = asked.step;
      clearTimeout(asked.timer);
      asked = null;
      found = ev.data.found;
      takeFound(ev.data.query);
      stepMatch(step);
    };
    worker.onerror = () => {
      stopWorker();
      $("hits").textContent = "re: could not run";
    };
    worker.postMessage({ texts: haystack });
    worker.postMessage({ query });
    const timer = setTimeout(() => {
      stopWorker();
      clearSearch();  // the last query's highlights went on standing beside this (QA)
      $("hits").textContent = "re: gave up after " + REGEX_MOST_MS / 1000 + " s";
    }, REGEX_MOST_MS);
    asked = { query, step, timer };
    $("hits").textContent = "searching…";
    return true;
  }

  function stopWorker() {
    if (asked) clearTimeout(asked.timer);
    asked = null;
    if (worker) worker.terminate();
    if (workerUrl) URL.revokeObjectURL(workerUrl);
    worker = workerUrl = null;
  }

  // --- the header ---------------------------------------------------------------------------

  function renderHeader() {
    const h = IX.header, s = IX.stats;
    $("title").textContent = inert(IX.title);
    $("meta").innerHTML = "session <code>" + safe(h.id) + "</code>" + (h.cwd ? " · cwd <code>" + safe(h.cwd) + "</code>" : "") +
      " · started " + safe(h.timestamp) + " · from <code>" + safe(IX.source) + "</code>" +
      (h.parentSession ? " · forked from <code>" + safe(h.parentSession) + "</code>" : "") + " · exported " + safe(IX.exported);
    const roles = s.roles || {};
    const types = s.types || {};
    const chip = (n, one, many) => "<span><b>" + Number(n || 0).toLocaleString() + "</b> " + esc(n === 1 ? one : many || one + "s") + "</span>";
    $("counts").innerHTML = [
      chip(s.entries, "entry", "entries"), chip(s.messages, "message"), chip(roles.user, "user", "user"),
      chip(roles.assistant, "assistant", "assistant"), chip(roles.toolResult, "tool result"), chip(s.forks, "fork"),
      chip(s.tips, "branch tip"), chip(s.labels, "label"), chip(types.compaction, "compaction"),
      chip(types.branch_summary, "branch summary", "branch summaries"),
      s.leafContextTokens !== null ? "<span>context at the leaf <b>~" + s.leafContextTokens.toLocaleString() + "</b> tokens (" + Number(s.leafContextMessages).toLocaleString() + " messages)</span>" : "",
      "<span>all message text <b>~" + s.messageTokens.toLocaleString() + "</b> tokens</span>",
      s.usageTokens ? "<span>usage reported <b>" + s.usageTokens.toLocaleString() + "</b> tokens, $" + Number(s.cost).toFixed(2) + "</span>" : "",
    ].join("");
    if (IX.damage.length || IX.unreadable.length) {
      const d = $("damage");
      d.hidden = false;
      d.textContent = inert("The source file is damaged; what could be read is shown.\n" + IX.damage.join("\n"));
    }
  }

  // --- wiring -------------------------------------------------------------------------------

  // Entry `i` selected at once, its address replacing the page's own: keys pressed back to back
  // each move from where the last one went (through `hashchange`, which comes later, ten quick
  // presses moved four rows), and a walk down the tree is not a hundred steps of the back button.
  function go(i) {
    select(i);
    history.replaceState(history.state, "", "#" + fragment(i));
  }

  function moveSelection(delta) {
    const r = selected >= 0 ? rowFor(selected) : -1;
    const next = Math.max(0, Math.min(view.rowsPos.length - 1, r + delta));
    if (view.rowsPos.length) go(view.rowsPos[next]);
  }

  function wire() {
    $("tree").addEventListener("scroll", () => requestAnimationFrame(paint), { passive: true });
    window.addEventListener("resize", () => requestAnimationFrame(paint));
    $("tree").addEventListener("click", (ev) => {
      const fold = ev.target.closest("[data-fold]");
      if (fold) {
        const i = Number(fold.dataset.fold);
        if (!view.folded.delete(i)) view.folded.add(i);
        build();
        return;
      }
      const row = ev.target.closest(".row");
      if (row) location.hash = fragment(Number(row.dataset.i));
    });
    $("main").addEventListener("click", (ev) => {
      const more = ev.target.closest("[data-expand]");
      if (more) { expanded.add(more.dataset.expand); renderMain(); return; }
      if (ev.target.closest("[data-all]")) { showAll = true; renderMain(); }
    });
    $("filter").addEventListener("change", (ev) => {
      view.filter = ev.target.value;
      build();
      refilterMatches();
      scrollToRow(rowFor(selected));
    });
    $("unfold").addEventListener("click", () => { view.folded.clear(); build(); scrollToRow(rowFor(selected)); });
    $("search").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); search(ev.target.value, ev.shiftKey ? -1 : 1); }
      else if (ev.key === "Escape") { ev.target.blur(); clearSearch(); }
    });
    $("search").addEventListener("input", (ev) => { if (!ev.target.value.trim()) search("", 0); });
    window.addEventListener("hashchange", () => {
      // no fragment (back to where the page opened): the entry the export was made at
      if (!fromHash() && IX.selected >= 0) select(IX.selected);
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "ArrowDown" || ev.key === "j") { ev.preventDefault(); moveSelection(1); }
      else if (ev.key === "ArrowUp" || ev.key === "k") { ev.preventDefault(); moveSelection(-1); }
      else if (ev.key === "PageDown") { ev.preventDefault(); moveSelection(Math.floor($("tree").clientHeight / ROW)); }
      else if (ev.key === "PageUp") { ev.preventDefault(); moveSelection(-Math.floor($("tree").clientHeight / ROW)); }
      else if (ev.key === "/") { ev.preventDefault(); $("search").focus(); }
      else if (ev.key === "Escape") clearSearch();
      else if (ev.key === " " && selected >= 0) {
        ev.preventDefault();
        // an entry with nothing shown below folded into "▸ 0 entries folded" (QA)
        if (!view.folded.has(selected) && !visibleChildren(selected).length) return;
        if (!view.folded.delete(selected)) view.folded.add(selected);
        build();
      }
    });
  }

  function start() {
    mark("index");
    renderHeader();
    wire();
    build();
    mark("tree");
    if (IX.selected >= 0) scrollToRow(rowFor(IX.selected));
    // called by the page right after the block of path entries
    window.sessiontreePathReady = () => {
      readPath();
      mark("path");
      if (!fromHash()) {
        if (IX.selected >= 0) select(IX.selected); else renderMain();
      }
      mark("context");
    };
    const ready = () => {
      readAll();
      mark("entries");
      if (renderedFor !== selected) { // it waited for entries off the path
        renderMain();
        $("main").scrollTop = $("main").scrollHeight; // the entry at the end, as `select` puts it
      }
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready); else ready();
  }

  window.addEventListener("error", (ev) => {
    document.body.dataset.error = String(ev.message);
  });
  start();
})();
