// buddy's Markdown renderer (docs/RATIONALE.md, "The page"): the safe subset
// the page shows a model's answer in. It builds elements itself and never
// parses HTML; links are absolute http(s) only; there are no images.
//
// Every part is linear in its input, adversarial inputs included: each
// regular expression here either finds line ends or is anchored at the start
// of a line and cannot trade characters between its parts, and every search
// for a closing marker resumes where the previous one stopped, so a line of
// 100,000 unclosed `*` costs what a line of words costs.
//
//	BuddyMarkdown.render(text)      // a DocumentFragment
//	const s = new BuddyMarkdown.Stream(body)
//	s.push(delta); s.push(delta)    // shows the text so far, keeping finished blocks
//	s.end()                         // body now holds exactly render(all the text)
(function (root) {
  'use strict';

  // Beyond this many characters a message is shown as plain text: a bound on
  // the DOM a single message makes, not on the renderer's time.
  const MAX = 200000;
  // Nesting bounds: inline spans and block quotes.
  const INLINE_DEPTH = 6;
  const QUOTE_DEPTH = 8;

  // stats.work counts the renderer's steps (characters and lines looked
  // at): the page tests read it to check that the work grows linearly with
  // the input.
  const stats = { work: 0 };

  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };
  const txt = (s) => document.createTextNode(s);

  // JavaScript's \s and \w (without the u flag), on a char code; NaN (past
  // the end of a string) is neither.
  function isSpace(c) {
    return c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
      c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
  }
  function isWord(c) {
    return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
  }

  // safeURL accepts absolute http(s) URLs only: no javascript:, data:,
  // relative or protocol-relative links.
  function safeURL(u) {
    if (!/^https?:\/\/[^\s]/i.test(u)) return null;
    try {
      const url = new URL(u);
      return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
    } catch (e) {
      return null;
    }
  }

  // finder returns find(from): the first position q >= from of s where
  // test(s, q) holds, or -1. Positions asked for only grow during a scan, so
  // it remembers its last answer and never looks at a character twice.
  function finder(s, test) {
    let lastFrom = -1;
    let lastAt = -1;
    return (from) => {
      if (from >= lastFrom && lastFrom >= 0 && (lastAt === -1 || lastAt >= from)) return lastAt;
      let q = from;
      const n = s.length;
      while (q < n && !test(s, q)) q++;
      stats.work += q - from + 1;
      lastFrom = from;
      lastAt = q < n ? q : -1;
      return lastAt;
    };
  }

  // Closing markers: `**` after a non-space; `__` after a non-space, not
  // before a word character; `*` after neither a space nor `*`, not before
  // `*`; `_` after neither a space nor `_`, not before a word character.
  const closeStrongStar = (s, q) => s.charCodeAt(q) === 42 && s.charCodeAt(q + 1) === 42 && !isSpace(s.charCodeAt(q - 1));
  const closeStrongUnder = (s, q) => s.charCodeAt(q) === 95 && s.charCodeAt(q + 1) === 95 &&
    !isSpace(s.charCodeAt(q - 1)) && !isWord(s.charCodeAt(q + 2));
  const closeEmStar = (s, q) => {
    if (s.charCodeAt(q) !== 42 || s.charCodeAt(q + 1) === 42) return false;
    const b = s.charCodeAt(q - 1);
    return b !== 42 && !isSpace(b);
  };
  const closeEmUnder = (s, q) => {
    if (s.charCodeAt(q) !== 95 || isWord(s.charCodeAt(q + 1))) return false;
    const b = s.charCodeAt(q - 1);
    return b !== 95 && !isSpace(b);
  };
  const isParen = (s, q) => s.charCodeAt(q) === 41;
  // The end of a link target: whitespace, `<` or `>`.
  const endsTarget = (s, q) => {
    const c = s.charCodeAt(q);
    return c === 60 || c === 62 || isSpace(c);
  };
  // The end of a bare URL: whitespace, `<`, `>`, `"`, `'` or a backtick.
  const endsBareURL = (s, q) => {
    const c = s.charCodeAt(q);
    return c === 60 || c === 62 || c === 34 || c === 39 || c === 96 || isSpace(c);
  };
  // What a bare URL does not end with: . , ; : ! ? ) ]
  const isTrailing = (c) => c === 46 || c === 44 || c === 59 || c === 58 || c === 33 || c === 63 || c === 41 || c === 93;

  function skipSpace(s, i) {
    const from = i;
    while (i < s.length && isSpace(s.charCodeAt(i))) i++;
    stats.work += i - from;
    return i;
  }

  // codeSpans pairs the backtick runs of s: a run of k backticks opens a
  // code span closed by the next run of exactly k; a longer run that finds
  // none opens at the k of its last backticks for the largest k that does.
  // It returns, by run start, {at, k, close} (close: the closing run's
  // start), or null when the run opens nothing.
  function codeSpans(s) {
    const starts = [];
    const lens = [];
    for (let i = s.indexOf('`'); i !== -1; i = s.indexOf('`', i)) {
      let j = i + 1;
      while (s.charCodeAt(j) === 96) j++;
      starts.push(i);
      lens.push(j - i);
      stats.work += j - i;
      i = j;
    }
    const spans = new Map();
    const nearest = new Map(); // run length → start of the nearest run to the right
    for (let r = starts.length - 1; r >= 0; r--) {
      const len = lens[r];
      let k = len;
      while (k > 0 && !nearest.has(k)) k--;
      stats.work += len - k + 1;
      spans.set(starts[r], k ? { at: starts[r] + len - k, k, close: nearest.get(k) } : null);
      nearest.set(len, starts[r]);
    }
    return spans;
  }

  function link(label, href, parent, depth) {
    const a = el('a');
    a.href = href;
    a.rel = 'noopener noreferrer nofollow';
    a.target = '_blank';
    a.title = href;
    if (label === null) a.textContent = href;
    else inline(label, a, depth + 1);
    parent.append(a);
  }

  // inline renders one line: `code`, **bold**, __bold__, *italic*, _italic_,
  // [text](url), bare http(s) URLs. Anything else, HTML included, stays
  // text. One pass left to right; each closing marker is found by a finder.
  function inline(s, parent, depth) {
    depth = depth || 0;
    const n = s.length;
    if (depth > INLINE_DEPTH) {
      parent.append(txt(s));
      return;
    }
    let spans = null;
    let strongStar = null;
    let strongUnder = null;
    let emStar = null;
    let emUnder = null;
    let paren = null;
    let targetEnd = null;
    let bareEnd = null;
    let tailAt = -1; // the last link target's end and where its ")" ends (or -1)
    let tailEnd = -1;
    let last = 0;
    let p = 0;
    const flush = (to) => {
      if (to > last) parent.append(txt(s.slice(last, to)));
    };
    while (p < n) {
      stats.work++;
      const c = s.charCodeAt(p);
      if (c === 96) { // `
        if (spans === null) spans = codeSpans(s);
        const sp = spans.get(p);
        if (!sp) {
          let j = p + 1;
          while (s.charCodeAt(j) === 96) j++;
          p = j;
          continue;
        }
        flush(sp.at);
        parent.append(el('code', null, s.slice(sp.at + sp.k, sp.close)));
        p = last = sp.close + sp.k;
        continue;
      }
      if (c === 42 || c === 95) { // * _
        const star = c === 42;
        const next = s.charCodeAt(p + 1);
        let tag = null;
        let q = -1;
        let w = 0;
        if (next === c) {
          const after = s.charCodeAt(p + 2);
          if (p + 2 < n && !isSpace(after)) {
            if (star) q = (strongStar || (strongStar = finder(s, closeStrongStar)))(p + 3);
            else q = (strongUnder || (strongUnder = finder(s, closeStrongUnder)))(p + 3);
            tag = 'strong';
            w = 2;
          }
        } else if (p + 1 < n && !isSpace(next) && (star || p === 0 || !isWord(s.charCodeAt(p - 1)))) {
          if (star) q = (emStar || (emStar = finder(s, closeEmStar)))(p + 2);
          else q = (emUnder || (emUnder = finder(s, closeEmUnder)))(p + 2);
          tag = 'em';
          w = 1;
        }
        if (q === -1) {
          p++;
          continue;
        }
        flush(p);
        const e = el(tag);
        inline(s.slice(p + w, q), e, depth + 1);
        parent.append(e);
        p = last = q + w;
        continue;
      }
      if (c === 91 || (c === 33 && s.charCodeAt(p + 1) === 91)) { // [ or ![
        // [label](target "title"): a label of 1 to 1000 characters without
        // brackets, a target of 1 to 4000 without spaces or <>, optionally
        // in <>, then an optional "title".
        const open = c === 33 ? p + 1 : p;
        let i = open + 1;
        const stop = Math.min(n, open + 1002);
        while (i < stop) {
          const d = s.charCodeAt(i);
          if (d === 91 || d === 93 || d === 10) break;
          i++;
        }
        stats.work += i - open;
        const label = i - open - 1;
        let end = -1;
        let u = -1;
        let targetTo = -1;
        if (label >= 1 && label <= 1000 && s.charCodeAt(i) === 93 && s.charCodeAt(i + 1) === 40) {
          u = skipSpace(s, i + 2);
          if (s.charCodeAt(u) === 60) u++;
          const r = (targetEnd || (targetEnd = finder(s, endsTarget)))(u);
          const runEnd = r === -1 ? n : r;
          const close = (paren || (paren = finder(s, isParen)))(u + 1);
          if (runEnd > u && close !== -1 && close < runEnd && close - u <= 4000) {
            targetTo = close;
            end = close + 1;
          } else if (runEnd > u && runEnd - u <= 4000) {
            if (tailAt !== runEnd) {
              tailAt = runEnd;
              tailEnd = linkTail(s, runEnd);
            }
            if (tailEnd !== -1) {
              targetTo = runEnd;
              end = tailEnd;
            }
          }
        }
        if (end === -1) {
          p++;
          continue;
        }
        flush(p);
        const href = safeURL(s.slice(u, targetTo));
        // An image (it would beacon out) or a link that is not http(s):
        // shown as the text it is.
        if (c === 33 || href === null) parent.append(txt(s.slice(p, end)));
        else link(s.slice(open + 1, i), href, parent, depth);
        p = last = end;
        continue;
      }
      if (c === 104 && (s.startsWith('http://', p) || s.startsWith('https://', p))) {
        const from = p + (s.charCodeAt(p + 4) === 115 ? 8 : 7);
        const r = (bareEnd || (bareEnd = finder(s, endsBareURL)))(from);
        let e = r === -1 ? n : r;
        const runEnd = e;
        while (e > from && isTrailing(s.charCodeAt(e - 1))) e--;
        stats.work += runEnd - e;
        if (e === from) {
          p++;
          continue;
        }
        flush(p);
        const url = s.slice(p, e);
        const href = safeURL(url);
        if (href === null) parent.append(txt(url));
        else link(null, href, parent, depth);
        p = last = e;
        continue;
      }
      p++;
    }
    flush(n);
  }

  // linkTail matches what may follow a link target ending at i: an optional
  // ">", an optional whitespace-led "title", whitespace, ")". It returns the
  // end of the ")" or -1.
  function linkTail(s, i) {
    if (s.charCodeAt(i) === 62) i++;
    if (isSpace(s.charCodeAt(i))) {
      const w = skipSpace(s, i);
      if (s.charCodeAt(w) === 34) {
        let q = w + 1;
        while (q < s.length && s.charCodeAt(q) !== 34 && s.charCodeAt(q) !== 10) q++;
        stats.work += q - w;
        if (s.charCodeAt(q) === 34) {
          const k = skipSpace(s, q + 1);
          if (s.charCodeAt(k) === 41) return k + 1;
        }
      }
    }
    const k = skipSpace(s, i);
    return s.charCodeAt(k) === 41 ? k + 1 : -1;
  }

  // Block syntax, one line at a time. Each pattern is anchored and its
  // quantifiers cannot trade characters, so a match costs its length.
  const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
  const HEADING = /^(#{1,6})\s+/;
  const LIST_ITEM = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+/;
  const QUOTE = /^\s{0,3}>/;
  const QUOTE_MARK = /^\s{0,3}>\s?/;
  const CONTINUATION = /^\s{2,}\S/;
  const BLANK = /^\s*$/;
  const isOrdered = (marker) => marker.charCodeAt(0) >= 48 && marker.charCodeAt(0) <= 57;

  function isBlockStart(line) {
    return FENCE.test(line) || LIST_ITEM.test(line) || HEADING.test(line) || QUOTE.test(line);
  }

  // put appends node (or a fragment's children) to parent and, when log is
  // an array, records what it appended so that undo can take it out again.
  function put(parent, node, log) {
    if (log) {
      if (node.nodeType === 11) for (const c of node.childNodes) log.push(c);
      else log.push(node);
    }
    parent.append(node);
  }

  // Blocks lays out lines into parent: paragraphs (lines joined by <br>),
  // headings, fenced code, lists, quotes. It keeps the block still open (the
  // one the next line may extend), so lines can come one at a time.
  function Blocks(parent, depth) {
    this.parent = parent;
    this.depth = depth;
    this.open = null; // {kind: 'fence'|'para'|'list'|'quote', ...}
  }

  // add lays out one line and returns the element its text went into (or
  // null when it shows nothing). Appends to elements that already existed
  // are recorded in log when it is an array.
  Blocks.prototype.add = function (line, log) {
    stats.work += line.length + 1;
    const o = this.open;
    if (o) {
      switch (o.kind) {
        case 'fence':
          if (line.trim().startsWith(o.fence)) {
            this.open = null;
            return null;
          }
          put(o.code, txt(o.lines++ ? '\n' + line : line), log);
          return o.code;
        case 'para':
          if (BLANK.test(line)) {
            this.open = null;
            return null;
          }
          if (!isBlockStart(line)) {
            const f = document.createDocumentFragment();
            f.append(el('br'));
            inline(line, f);
            put(o.el, f, log);
            return o.el;
          }
          break;
        case 'list': {
          const m = LIST_ITEM.exec(line);
          if (m && isOrdered(m[1]) === o.ordered) {
            const li = el('li');
            inline(line.slice(m[0].length), li);
            put(o.el, li, log);
            o.last = li;
            return li;
          }
          if (!m && CONTINUATION.test(line)) {
            const f = document.createDocumentFragment();
            f.append(txt(' '));
            inline(line.trim(), f);
            put(o.last, f, log);
            return o.last;
          }
          break;
        }
        case 'quote':
          if (QUOTE.test(line)) return o.inner.add(line.replace(QUOTE_MARK, ''), log);
          break;
      }
      this.open = null; // the line ends the open block and starts another
    }
    let m = FENCE.exec(line);
    if (m) {
      const pre = el('pre');
      const code = el('code');
      pre.append(code);
      put(this.parent, pre, log);
      this.open = { kind: 'fence', fence: m[1], code, lines: 0 };
      return null;
    }
    if (BLANK.test(line)) return null;
    m = HEADING.exec(line);
    if (m) {
      const h = el('h' + Math.min(5, m[1].length + 2));
      inline(line.slice(m[0].length), h);
      put(this.parent, h, log);
      return h;
    }
    m = LIST_ITEM.exec(line);
    if (m) {
      const ordered = isOrdered(m[1]);
      const list = el(ordered ? 'ol' : 'ul');
      if (ordered && parseInt(m[1], 10) !== 1) list.start = parseInt(m[1], 10);
      const li = el('li');
      inline(line.slice(m[0].length), li);
      list.append(li);
      put(this.parent, list, log);
      this.open = { kind: 'list', ordered, el: list, last: li };
      return li;
    }
    if (this.depth < QUOTE_DEPTH && QUOTE.test(line)) {
      const bq = el('blockquote');
      put(this.parent, bq, log);
      const inner = new Blocks(bq, this.depth + 1);
      this.open = { kind: 'quote', inner };
      return inner.add(line.replace(QUOTE_MARK, ''), log);
    }
    const p = el('p');
    inline(line, p);
    put(this.parent, p, log);
    this.open = { kind: 'para', el: p };
    return p;
  };

  // snapshot and restore save and bring back the open blocks (not the DOM:
  // undo the log for that).
  Blocks.prototype.snapshot = function () {
    const o = this.open;
    return { open: o && Object.assign({}, o), inner: o && o.kind === 'quote' ? o.inner.snapshot() : null };
  };
  Blocks.prototype.restore = function (snap) {
    this.open = snap.open;
    if (snap.inner) snap.open.inner.restore(snap.inner);
  };

  // render returns a fragment: paragraphs, headings, fenced code, lists,
  // quotes, and the inline subset. No HTML is ever parsed.
  function render(src) {
    const frag = document.createDocumentFragment();
    src = String(src).replace(/\r\n?/g, '\n');
    if (src.length > MAX) {
      frag.append(el('p', 'plain', src));
      return frag;
    }
    const blocks = new Blocks(frag, 0);
    for (const line of src.split('\n')) blocks.add(line);
    return frag;
  }

  // Beyond this length the unfinished last line of a stream is laid out
  // afresh only each time it has grown by a quarter; in between, what
  // arrives is appended to it as text. A huge line then costs a small
  // multiple of its length, not its length at every frame.
  const RELAY = 1024;

  // Stream shows a message as it arrives, in body. Finished lines are laid
  // out once (blocks keep their elements and grow); only the unfinished
  // last line is laid out again, as if the message ended there, and taken
  // out again when more arrives.
  function Stream(body) {
    this.body = body;
    this.blocks = new Blocks(body, 0);
    this.line = ''; // the unfinished last line
    this.cr = false; // a "\r" ended the last piece ("\r\n" may be split)
    this.size = 0; // characters so far, line ends counted once
    this.text = ''; // the text so far, kept for the plain-text fallback
    this.plain = null; // the plain-text element beyond MAX
    this.shown = null; // {snap, log, into, len}: the unfinished line laid out
  }

  Stream.prototype.push = function (piece) {
    piece = String(piece);
    if (this.cr) piece = '\r' + piece;
    this.cr = piece.endsWith('\r');
    if (this.cr) piece = piece.slice(0, -1);
    piece = piece.replace(/\r\n?/g, '\n');
    if (!piece) return;
    this.text += piece;
    this.size += piece.length;
    stats.work += piece.length;
    if (this.plain) {
      this.plain.append(txt(piece));
      return;
    }
    if (this.size > MAX) {
      this.unshow();
      this.plain = el('p', 'plain', this.text);
      this.body.replaceChildren(this.plain);
      return;
    }
    let nl = piece.indexOf('\n');
    if (nl === -1) {
      this.line += piece;
      this.show(piece);
      return;
    }
    this.unshow();
    let from = 0;
    let line = this.line + piece.slice(0, nl);
    for (;;) {
      this.blocks.add(line);
      from = nl + 1;
      nl = piece.indexOf('\n', from);
      if (nl === -1) break;
      line = piece.slice(from, nl);
    }
    this.line = piece.slice(from);
    this.show(null);
  };

  // show lays out the unfinished line (added: what it gained since the last
  // call, or null when it is new).
  Stream.prototype.show = function (added) {
    const len = this.line.length;
    const s = this.shown;
    if (s && added !== null && len > RELAY && len * 4 < s.len * 5) {
      if (s.into) put(s.into, txt(added), s.log);
      return;
    }
    this.unshow();
    const snap = this.blocks.snapshot();
    const log = [];
    const into = this.blocks.add(this.line, log);
    this.shown = { snap, log, into, len };
  };

  Stream.prototype.unshow = function () {
    const s = this.shown;
    if (!s) return;
    for (const node of s.log) node.remove();
    this.blocks.restore(s.snap);
    this.shown = null;
  };

  // end finishes the message: the body then holds what render(all the
  // text) returns.
  Stream.prototype.end = function () {
    if (this.cr) {
      this.cr = false;
      this.push('\n');
    }
    if (this.plain) return;
    this.unshow();
    this.blocks.add(this.line);
    this.line = '';
  };

  root.BuddyMarkdown = {
    render,
    Stream,
    safeURL,
    MAX,
    work: () => stats.work,
  };
})(typeof window !== 'undefined' ? window : globalThis);
