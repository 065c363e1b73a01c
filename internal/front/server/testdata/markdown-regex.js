// The page's Markdown renderer as it was before markdown.js: the same subset
// with one regular expression for the inline spans, whose lazy spans and
// bounded link repetitions backtrack quadratically on unclosed markers.
// TestWebMarkdownReference renders short random texts with both and wants
// the same elements (markdown.js differs on purpose only for a list item or
// heading holding U+2028 or U+2029, which the texts leave out).
(function () {
  'use strict';
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };

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

  // Inline: `code`, **bold**, __bold__, *italic*, _italic_, [text](url),
  // bare http(s) URLs. Anything else, HTML included, stays text.
  const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__(?!\w)|\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)|(?<![\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w])|(!?)\[([^\[\]\n]{1,1000})\]\(\s*<?([^\s<>]{1,4000}?)>?(?:\s+"[^"\n]*")?\s*\)|(https?:\/\/[^\s<>"'`]*[^\s<>"'`.,;:!?)\]])/g;

  function inline(text, parent, depth) {
    depth = depth || 0;
    if (depth > 6) {
      parent.append(document.createTextNode(text));
      return;
    }
    const re = new RegExp(INLINE.source, 'g');
    let last = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      last = re.lastIndex;
      if (m[1] !== undefined) {
        parent.append(el('code', null, m[2]));
      } else if (m[3] !== undefined || m[4] !== undefined) {
        const s = el('strong');
        inline(m[3] !== undefined ? m[3] : m[4], s, depth + 1);
        parent.append(s);
      } else if (m[5] !== undefined || m[6] !== undefined) {
        const s = el('em');
        inline(m[5] !== undefined ? m[5] : m[6], s, depth + 1);
        parent.append(s);
      } else if (m[8] !== undefined) {
        const href = safeURL(m[9]);
        if (m[7] === '!' || href === null) {
          // An image (it would beacon out) or a link that is not http(s):
          // shown as the text it is.
          parent.append(document.createTextNode(m[0]));
        } else {
          link(m[8], href, parent, depth);
        }
      } else if (m[10] !== undefined) {
        const href = safeURL(m[10]);
        if (href === null) parent.append(document.createTextNode(m[10]));
        else link(null, href, parent, depth);
      }
      if (re.lastIndex === m.index) re.lastIndex++;
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  }

  const LIST_ITEM = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
  function isBlockStart(line) {
    return FENCE.test(line) || LIST_ITEM.test(line) || /^#{1,6}\s/.test(line) || /^\s{0,3}>/.test(line);
  }

  // Beyond this size a message is shown as plain text: the renderer stays
  // linear and a huge message cannot stall the page.
  const MD_MAX = 200000;

  // renderMarkdown returns a fragment: paragraphs, headings, fenced code,
  // lists, quotes, and the inline subset above. No HTML is ever parsed.
  function renderMarkdown(src, depth) {
    depth = depth || 0;
    const frag = document.createDocumentFragment();
    src = String(src).replace(/\r\n?/g, '\n');
    if (src.length > MD_MAX) {
      frag.append(el('p', 'plain', src));
      return frag;
    }
    const lines = src.split('\n');
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m = FENCE.exec(line);
      if (m) {
        const fence = m[1];
        const buf = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence)) buf.push(lines[i++]);
        i++;
        const pre = el('pre');
        pre.append(el('code', null, buf.join('\n')));
        frag.append(pre);
        continue;
      }
      if (/^\s*$/.test(line)) { i++; continue; }
      m = /^(#{1,6})\s+(.*)$/.exec(line);
      if (m) {
        const h = el('h' + Math.min(5, m[1].length + 2));
        inline(m[2], h);
        frag.append(h);
        i++;
        continue;
      }
      m = LIST_ITEM.exec(line);
      if (m) {
        const ordered = /\d/.test(m[1]);
        const list = el(ordered ? 'ol' : 'ul');
        if (ordered && parseInt(m[1], 10) !== 1) list.start = parseInt(m[1], 10);
        while (i < lines.length) {
          const mm = LIST_ITEM.exec(lines[i]);
          if (mm && /\d/.test(mm[1]) === ordered) {
            const li = el('li');
            inline(mm[2], li);
            list.append(li);
            i++;
          } else if (!mm && /^\s{2,}\S/.test(lines[i]) && list.lastChild) {
            list.lastChild.append(document.createTextNode(' '));
            inline(lines[i].trim(), list.lastChild);
            i++;
          } else {
            break;
          }
        }
        frag.append(list);
        continue;
      }
      if (/^\s{0,3}>/.test(line) && depth < 8) {
        const buf = [];
        while (i < lines.length && /^\s{0,3}>/.test(lines[i])) buf.push(lines[i++].replace(/^\s{0,3}>\s?/, ''));
        const bq = el('blockquote');
        bq.append(renderMarkdown(buf.join('\n'), depth + 1));
        frag.append(bq);
        continue;
      }
      const p = el('p');
      let first = true;
      while (i < lines.length && !/^\s*$/.test(lines[i]) && (first || !isBlockStart(lines[i]))) {
        if (!first) p.append(el('br'));
        inline(lines[i], p);
        first = false;
        i++;
      }
      frag.append(p);
    }
    return frag;
  }

  window.regexMarkdown = renderMarkdown;
})();
