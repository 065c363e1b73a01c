// buddy's page (docs/PROTOCOL.md): sign-in, conversations, chat, tool call
// cards, skills and the approval dialog. No framework and no build step.
//
// Everything a model, a skill or a file says is untrusted: it reaches the
// DOM only as text nodes (textContent) or through markdown.js, which builds
// elements itself and never parses HTML (nothing in either file assigns
// markup); links are http(s) only; there are no images. Whatever loops over
// such text does so in time linear in its length.
(function () {
  'use strict';

  const md = window.BuddyMarkdown; // markdown.js

  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };

  // ---------------------------------------------------------------- text

  // visible shows the characters that could make text look like something
  // else (bidi overrides, zero-width and control characters) as ⟦U+XXXX⟧.
  const INVISIBLE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;
  function visible(s) {
    return String(s).replace(INVISIBLE, (c) => '⟦U+' + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟧');
  }

  function fmtBytes(n) {
    if (n < 1024) return n + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
    return (n / 1024 / 1024).toFixed(1) + ' MB';
  }

  function pretty(v) {
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); }
  }

  // countLines counts the lines of s (one more than its newlines).
  function countLines(s) {
    let n = 1;
    for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) n++;
    return n;
  }

  // folded shows text in a <pre>; beyond limit characters it shows the
  // start and a disclosure that renders the whole text when opened.
  function folded(text, limit) {
    const wrap = el('div', 'folded');
    text = visible(text);
    const lines = countLines(text);
    if (text.length <= limit && lines <= 40) {
      wrap.append(el('pre', null, text));
      return wrap;
    }
    let head = text.slice(0, limit);
    const hl = head.split('\n');
    if (hl.length > 20) head = hl.slice(0, 20).join('\n');
    wrap.append(el('pre', null, head + '…'));
    const d = el('details');
    const sum = el('summary', null, 'Show all ' + text.length.toLocaleString('en') + ' characters (' + lines.toLocaleString('en') + ' lines)');
    d.append(sum);
    d.addEventListener('toggle', () => {
      if (d.open && d.childNodes.length === 1) d.append(fullText(text));
    });
    wrap.append(d);
    return wrap;
  }

  // fullText is a long text in pieces of about 32 KB, each laid out only
  // when scrolled into view (content-visibility in app.css): a 1 MiB result
  // opens at once and scrolls smoothly.
  function fullText(text) {
    const box = el('div', 'fulltext');
    const CHUNK = 32768;
    for (let i = 0; i < text.length;) {
      let j = Math.min(text.length, i + CHUNK);
      // End the piece at a newline within 4 KB, if there is one (looking
      // no further: a text without newlines costs no rescans).
      const nl = j < text.length ? text.slice(j, j + 4096).indexOf('\n') : -1;
      if (nl !== -1) j += nl + 1;
      box.append(el('pre', 'chunk', text.slice(i, j)));
      i = j;
    }
    return box;
  }

  // ---------------------------------------------------------------- state

  let channelTimer = null; // refreshes the chat channels' panel (channels below)

  const state = {
    skills: new Map(), // name → skill
    convs: [],
    current: null, // conversation id
    running: new Set(), // conversations with a turn running
    cards: new Map(), // call id → card (current conversation)
    approvals: new Map(), // approval id → approval_request frame
    shown: null, // approval id in the dialog
    answered: new Set(), // approval ids answered from this tab
    stream: null, // {li, body, md, text, pending, scheduled, rest}
    view: 0, // counts the conversations opened, so that late answers are dropped
    folding: Promise.resolve(), // the compactions being folded, in order
    usage: null, // the current conversation's usage (GET, then each done)
    leftOut: null, // {text, li}: the last left_out notice
    noProvider: false,
    ws: null,
    wsUp: false,
    retry: 0,
    pendingInvoke: false,
  };

  // rawText keeps the text of a message shown live (a frame names no
  // message id), to find it among the stored messages (adopt).
  const rawText = new WeakMap();

  // ------------------------------------------------------------------ api

  class APIError extends Error {
    constructor(status, kind, detail) {
      super(detail);
      this.status = status;
      this.kind = kind;
    }
  }

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: {} };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    if (resp.status === 204) return null;
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    if (!resp.ok) {
      const err = (data && data.error) || { kind: 'internal', detail: 'HTTP ' + resp.status };
      if (resp.status === 401) showSignin('Your session ended: sign in again.');
      throw new APIError(resp.status, err.kind, err.detail);
    }
    return data;
  }

  // -------------------------------------------------------------- sign-in

  async function createSession(token) {
    const resp = await fetch('/api/session', {
      method: 'POST', credentials: 'same-origin', headers: { Authorization: 'Bearer ' + token },
    });
    if (resp.status === 401) throw new Error('That token is not this server\'s token.');
    if (!resp.ok) throw new Error('Signing in failed (HTTP ' + resp.status + ').');
  }

  function showSignin(message) {
    $('app').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = message || '';
    if (state.ws) { state.ws.onclose = null; state.ws.close(); state.ws = null; }
    $('signin-token').focus();
  }

  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const input = $('signin-token');
    const token = input.value.trim().replace(/^.*#token=/, '');
    input.value = '';
    try {
      await createSession(token);
      $('signin-error').textContent = '';
      await start();
    } catch (e) {
      $('signin-error').textContent = e.message;
      input.focus();
    }
  });

  // ---------------------------------------------------------------- boot

  async function boot() {
    let convFromHash = null;
    const h = location.hash.slice(1);
    const tm = /(?:^|&)token=([^&]*)/.exec(h);
    const cm = /(?:^|&)c=(c_[0-9a-f]{1,64})(?:&|$)/.exec(h);
    if (cm) convFromHash = cm[1];
    if (tm) {
      // The token leaves the address bar (and history) before anything else.
      history.replaceState(null, '', location.pathname + location.search + (cm ? '#c=' + cm[1] : ''));
      try {
        await createSession(decodeURIComponent(tm[1]));
      } catch (e) {
        showSignin(e.message);
        return;
      }
    }
    await start(convFromHash);
  }

  async function start(convID) {
    try {
      await loadSkills();
    } catch (e) {
      if (!(e instanceof APIError && e.status === 401)) showSignin('The server did not answer: ' + e.message);
      return;
    }
    $('signin').hidden = true;
    $('app').hidden = false;
    connect();
    loadChannels();
    clearInterval(channelTimer);
    channelTimer = setInterval(loadChannels, 60000);
    await loadConversations();
    if (convID && state.convs.some((c) => c.id === convID)) await openConversation(convID);
    else newConversationView();
    document.body.dataset.readyMs = String(Math.round(performance.now()));
    document.body.dataset.ready = '1';
  }

  // ------------------------------------------------------------ websocket

  function connect() {
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws');
    state.ws = ws;
    setConn('connecting…', false);
    ws.onopen = () => {
      state.wsUp = true;
      state.retry = 0;
      setConn('connected', false);
      if (state.current) wsSend({ type: 'subscribe', conversation_id: state.current });
    };
    ws.onmessage = (ev) => {
      let f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f && typeof f === 'object') onFrame(f);
    };
    ws.onclose = () => {
      state.wsUp = false;
      if (state.ws !== ws) return;
      setConn('disconnected: reconnecting…', true);
      const wait = Math.min(5000, 250 * 2 ** state.retry++);
      setTimeout(async () => {
        if (state.ws !== ws) return;
        try { await api('GET', '/api/skills'); } catch (e) { if (e.status === 401) return; }
        if (state.ws === ws) connect();
      }, wait);
    };
  }

  function wsSend(f) {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
      banner('Not connected to buddy: try again in a moment.');
      return false;
    }
    state.ws.send(JSON.stringify(f));
    return true;
  }

  function setConn(text, bad) {
    $('conn-status').textContent = text;
    $('conn-status').classList.toggle('bad', bad);
  }

  function onFrame(f) {
    const here = f.conversation_id && f.conversation_id === state.current;
    switch (f.type) {
      case 'conversation':
        if (state.pendingInvoke) {
          state.pendingInvoke = false;
          setCurrent(f.conversation_id);
          loadConversations();
        }
        break;
      case 'delta':
        if (here) onDelta(f.text || '');
        break;
      case 'message':
        if (here && f.role === 'assistant') finishStream(f.text || '');
        break;
      case 'tool_call':
        if (here) { finishStream(null); upsertCard(f); }
        break;
      case 'tool_result':
        if (here) upsertCard(f);
        if (here && !$('audit').hidden) loadAudit();
        break;
      case 'approval_request':
        state.approvals.set(f.id, f);
        if (here) cardNote(f.call_id, 'Waiting for your approval…', '');
        showNextApproval();
        break;
      case 'approval_resolved':
        onResolved(f);
        break;
      case 'compaction':
        if (here) onCompaction(f);
        break;
      case 'left_out':
        if (here) leftOut(f);
        break;
      case 'done':
        state.running.delete(f.conversation_id);
        if (here) {
          finishStream(null);
          addUsage(f.usage);
          if (f.reason === 'canceled') note('Stopped.');
          else if (f.reason === 'max_iterations') note('The turn stopped at the round limit.');
          updateComposer();
        }
        touchConversation(f.conversation_id);
        break;
      case 'error':
        onErrorFrame(f);
        break;
      case 'notification':
        onNotification(f);
        break;
    }
  }

  function onErrorFrame(f) {
    if (f.conversation_id && f.conversation_id !== state.current) return;
    if (f.kind === 'config') {
      state.noProvider = true;
      if (f.conversation_id) state.running.delete(f.conversation_id);
      const lastUser = $('messages').querySelector(':scope > li.msg.user:last-child');
      if (lastUser) lastUser.append(el('div', 'muted small', 'not sent: no model to answer it'));
      banner('No LLM provider is configured, so nobody can answer messages yet. ' + f.detail +
        ' You can still run a skill directly below.');
      showInvoke();
      updateComposer();
      return;
    }
    if (f.conversation_id) state.running.delete(f.conversation_id);
    finishStream(null);
    note('Error (' + f.kind + '): ' + f.detail, true);
    updateComposer();
  }

  // --------------------------------------------------------------- skills

  async function loadSkills() {
    const data = await api('GET', '/api/skills');
    state.skills = new Map((data.skills || []).map((s) => [s.name, s]));
    renderSkills();
  }

  const POLICY = {
    always: 'asks before every call',
    once: 'asks once per conversation',
    trust: 'runs without asking',
  };

  function renderSkills() {
    const list = $('skill-list');
    list.replaceChildren();
    const sel = $('invoke-skill');
    sel.replaceChildren();
    for (const s of state.skills.values()) {
      const li = el('li');
      const head = el('div', 'card-head');
      head.append(el('span', 'skill-name', s.name), el('span', 'level ' + s.permission_level, s.permission_level));
      if (s.version) head.append(el('span', 'muted small', 'v' + s.version));
      li.append(head);
      if (s.description) li.append(el('div', 'small', s.description));
      li.append(el('div', 'small', 'Approval: ' + (POLICY[s.approval] || s.approval)));
      const t = el('ul', 'small');
      if (!s.touches || s.touches.length === 0) t.append(el('li', 'muted', 'touches nothing outside its sandbox'));
      else for (const x of s.touches) t.append(el('li', null, visible(x)));
      li.append(t);
      // The credentials buddy sends for it: names and hosts, never values.
      if ((s.credentials || []).length) li.append(el('div', 'small credentials', 'Credentials: ' + credentialsText(s.credentials)));
      if (s.status !== 'ready') li.append(el('div', 'error small', 'cannot run: ' + s.status + (s.problem ? ' (' + s.problem + ')' : '')));
      else {
        const b = el('button', 'small', 'Run…');
        b.type = 'button';
        b.setAttribute('aria-label', 'Run ' + s.name + ' directly');
        b.addEventListener('click', () => { showInvoke(s.name); $('invoke-args').focus(); });
        li.append(b);
        const o = el('option', null, s.name);
        o.value = s.name;
        sel.append(o);
      }
      list.append(li);
    }
    if (sel.options.length) fillArgs(sel.value);
  }

  function fillArgs(name) {
    const s = state.skills.get(name);
    const props = (s && s.input_schema && s.input_schema.properties) || {};
    const tmpl = {};
    for (const [k, v] of Object.entries(props)) {
      tmpl[k] = v && v.type === 'string' ? '' : v && (v.type === 'integer' || v.type === 'number') ? 0 : v && v.type === 'boolean' ? false : null;
    }
    $('invoke-args').value = JSON.stringify(tmpl, null, 2);
  }

  function showInvoke(name) {
    $('invoke-panel').hidden = false;
    if (name) { $('invoke-skill').value = name; fillArgs(name); }
  }

  $('invoke-skill').addEventListener('change', (e) => fillArgs(e.target.value));
  $('invoke-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    let args;
    try {
      args = JSON.parse($('invoke-args').value);
    } catch (e) {
      $('invoke-error').textContent = 'The arguments are not JSON: ' + e.message;
      return;
    }
    if (!args || typeof args !== 'object' || Array.isArray(args)) {
      $('invoke-error').textContent = 'The arguments must be a JSON object.';
      return;
    }
    $('invoke-error').textContent = '';
    const f = { type: 'invoke', skill: $('invoke-skill').value, arguments: args };
    if (state.current) f.conversation_id = state.current;
    else state.pendingInvoke = true;
    wsSend(f);
  });

  // One side panel at a time: they share the right-hand column.
  function closePanels(except) {
    for (const id of ['skills', 'audit', 'schedule', 'channels']) {
      if (id === except) continue;
      $(id).hidden = true;
      $(id + '-toggle').setAttribute('aria-expanded', 'false');
    }
  }

  $('skills-toggle').addEventListener('click', () => {
    const open = $('skills').hidden;
    if (open) closePanels('skills');
    $('skills').hidden = !open;
    $('skills-toggle').setAttribute('aria-expanded', String(open));
    if (open) $('skills-title').setAttribute('tabindex', '-1'), $('skills-title').focus();
  });

  // --------------------------------------------------------- conversations

  async function loadConversations() {
    try {
      const data = await api('GET', '/api/conversations');
      state.convs = data.conversations || [];
    } catch (e) {
      return;
    }
    renderConversations();
  }

  function renderConversations() {
    const list = $('conv-list');
    list.replaceChildren();
    $('conv-empty').hidden = state.convs.length > 0;
    const cur = state.convs.find((x) => x.id === state.current);
    if (cur) $('chat-title').textContent = visible(cur.title || 'Untitled');
    const waitingIn = new Set();
    for (const a of state.approvals.values()) waitingIn.add(a.conversation_id);
    for (const c of state.convs) {
      const li = el('li');
      if (c.id === state.current) li.className = 'current';
      const title = visible(c.title || 'Untitled');
      const open = el('button', 'open', title);
      open.type = 'button';
      open.title = title;
      if (c.id === state.current) open.setAttribute('aria-current', 'page');
      open.addEventListener('click', () => openConversation(c.id));
      if (waitingIn.has(c.id)) open.prepend(el('span', 'badge', '● '));
      const del = el('button', 'delete', '✕');
      del.type = 'button';
      del.setAttribute('aria-label', 'Delete conversation ' + title);
      del.addEventListener('click', () => deleteConversation(c.id, title, del));
      li.append(open, del);
      list.append(li);
    }
  }

  function touchConversation() {
    loadConversations();
  }

  function setCurrent(id) {
    state.current = id;
    history.replaceState(null, '', location.pathname + location.search + (id ? '#c=' + id : ''));
    const c = state.convs.find((x) => x.id === id);
    $('chat-title').textContent = c ? visible(c.title || 'Untitled') : id ? 'Conversation' : 'New conversation';
    renderConversations();
    if (!$('audit').hidden) loadAudit();
  }

  function newConversationView() {
    setCurrent(null);
    resetView(null);
    $('messages').replaceChildren();
    clearBanner();
    if (state.noProvider) showInvoke();
    updateComposer();
  }

  async function openConversation(id) {
    const t0 = performance.now();
    let data;
    try {
      data = await api('GET', '/api/conversations/' + encodeURIComponent(id));
    } catch (e) {
      banner('Could not open the conversation: ' + e.message);
      return;
    }
    setCurrent(id);
    clearBanner();
    resetView(data.usage);
    const t1 = performance.now();
    renderHistory(data);
    // How long opening took (fetch + render) and rendering alone, in ms.
    document.body.dataset.openMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.renderMs = (performance.now() - t1).toFixed(1);
    wsSend({ type: 'subscribe', conversation_id: id });
    closeSidebar();
    updateComposer();
    $('composer-text').focus();
  }

  // resetView forgets what the page knew of the conversation shown before.
  function resetView(usage) {
    state.view++;
    state.cards.clear();
    state.stream = null;
    state.leftOut = null;
    setUsage(usage);
  }

  // The first click on ✕ asks (the button says "Delete?"), the second,
  // within a few seconds, deletes.
  async function deleteConversation(id, title, btn) {
    if (!btn.dataset.armed) {
      btn.dataset.armed = '1';
      btn.textContent = 'Delete?';
      btn.setAttribute('aria-label', 'Confirm: delete conversation ' + title + ' (its calls in flight are canceled)');
      setTimeout(() => {
        if (!btn.isConnected) return;
        delete btn.dataset.armed;
        btn.textContent = '✕';
        btn.setAttribute('aria-label', 'Delete conversation ' + title);
      }, 4000);
      return;
    }
    try {
      await api('DELETE', '/api/conversations/' + encodeURIComponent(id));
    } catch (e) {
      banner('Could not delete it: ' + e.message);
      return;
    }
    for (const [aid, a] of state.approvals) if (a.conversation_id === id) state.approvals.delete(aid);
    if (state.current === id) newConversationView();
    await loadConversations();
    showNextApproval();
  }

  $('new-conv').addEventListener('click', async () => {
    newConversationView();
    closeSidebar();
    $('composer-text').focus();
  });

  $('menu-toggle').addEventListener('click', () => {
    const open = !$('sidebar').classList.contains('open');
    $('sidebar').classList.toggle('open', open);
    $('menu-toggle').setAttribute('aria-expanded', String(open));
    if (open) $('new-conv').focus();
  });
  function closeSidebar() {
    $('sidebar').classList.remove('open');
    $('menu-toggle').setAttribute('aria-expanded', 'false');
  }

  // -------------------------------------------------------------- history

  function renderHistory(data) {
    const box = $('messages');
    box.replaceChildren(buildMessages(data.messages || [], approvalsByCall(data)));
    box.scrollTop = box.scrollHeight;
  }

  function approvalsByCall(data) {
    const byCall = new Map();
    for (const a of data.approvals || []) byCall.set(a.call_id, a);
    return byCall;
  }

  // buildMessages lays out stored messages, oldest first. A summary's card
  // stands where the first message it covers was, folded, and holds those
  // messages in order. Ranges grow from the conversation's start, so a
  // later summary covers an earlier one's range: the messages are merged
  // into the later card, and the earlier summary stands among them, after
  // the last message it covers (where it was made), without a list of its
  // own. Each message is placed once, the cards never nest, and opening
  // one card shows every message it covers. One pass over the messages,
  // after sorting the summaries. notice: {id, text} shown on a card.
  function buildMessages(msgs, byCall, notice) {
    const root = document.createDocumentFragment();
    const sums = msgs.filter((m) => m.role === 'summary')
      .sort((a, b) => a.covers_from - b.covers_from || b.covers_to - a.covers_to || b.id - a.id);
    let card = null; // the open card: {to, list, marks: summaries inside it, next: the first not placed, dirty}
    let k = 0;
    const flush = (id) => {
      // Those placed already end before any added since: sorting keeps them.
      if (card && card.dirty) card.marks.sort((a, b) => a.covers_to - b.covers_to || a.id - b.id);
      if (card) card.dirty = false;
      while (card && card.next < card.marks.length && card.marks[card.next].covers_to < id) {
        card.list.append(summaryItem(card.marks[card.next++], '', true).li);
      }
    };
    const reach = (id) => {
      if (card && card.to < id) {
        flush(Infinity);
        card = null;
      }
      while (k < sums.length && sums[k].covers_from <= id) {
        const s = sums[k++];
        if (card && s.covers_to <= card.to) {
          card.marks.push(s);
          card.dirty = true;
          continue;
        }
        flush(Infinity); // a range that crosses the open card's end (buddy makes none) closes it
        const c = summaryItem(s, notice && notice.id === s.id ? notice.text : '', false);
        root.append(c.li);
        card = { to: s.covers_to, list: c.list, marks: [], next: 0, dirty: false };
      }
      flush(id);
    };
    for (const m of msgs) {
      if (m.role === 'summary') continue;
      reach(m.id);
      const li = messageItem(m, byCall);
      if (li) (card ? card.list : root).append(li);
    }
    reach(Infinity);
    return root;
  }

  // messageItem is the list item of a stored message, carrying its id; none
  // for an assistant message that only called tools (its cards show it).
  function messageItem(m, byCall) {
    let li = null;
    if (m.role === 'user') li = userItem(m.text || '');
    else if (m.role === 'assistant') {
      if (m.text) li = assistantItem(m.text, false).li;
    } else if (m.role === 'tool') {
      const card = makeCard({ call_id: m.call_id, skill: m.skill, arguments: m.arguments });
      fillResult(card, m);
      const a = byCall.get(m.call_id);
      if (a) setCardNote(card, approvalText(a.status, a.decided_by), a.status === 'approved' ? 'ok' : 'fail');
      li = card.li;
    }
    if (li) li.dataset.id = m.id;
    return li;
  }

  // summaryItem is a summary: its card, folded, with what it says (as an
  // assistant message says it) and then the list of the messages it stands
  // for; or, inline among them in a later card, what it says only.
  function summaryItem(s, notice, inline) {
    const c = s.compaction || {};
    const n = c.messages;
    const dropped = c.method === 'dropped';
    const li = el('li', 'msg summary' + (inline ? ' inline' : ''));
    li.dataset.id = s.id;
    li.dataset.from = s.covers_from;
    li.dataset.to = s.covers_to;
    const d = el('details', inline ? 'fold' : 'card fold');
    const head = el('summary');
    head.append(el('span', 'fold-title', (n > 0 ? n + ' earlier message' + (n === 1 ? '' : 's') : 'Earlier messages') +
      (dropped ? ' left out' : ' summarised') + ' to fit the model\'s context window'));
    if (notice) head.append(el('span', 'fold-note small muted', visible(notice)));
    d.append(head);
    if (s.text) {
      const body = el('div', 'msg-body md');
      body.append(md.render(s.text));
      const sum = el('div', 'msg assistant fold-summary');
      sum.append(el('div', 'msg-role', 'Summary'), body);
      d.append(sum);
    } else {
      d.append(el('p', 'small muted', 'The model no longer sees them' + (c.error ? ' (the summary failed: ' + visible(c.error) + ')' : '') +
        (inline ? '.' : '; they are all kept here:')));
    }
    const list = el('ol', 'fold-list');
    if (!inline) d.append(list);
    li.append(d);
    return { li, list };
  }

  // A compaction while the conversation is shown: the covered messages
  // already on the page fold under the summary's card, where they were.
  // Frames carry no message ids (nor the summary's text), so the
  // conversation is read once to learn them; compactions fold one at a
  // time, in order.
  function onCompaction(f) {
    const view = state.view;
    state.folding = state.folding.then(async () => {
      let data = null;
      try {
        data = await api('GET', '/api/conversations/' + encodeURIComponent(f.conversation_id));
      } catch (e) {
        data = null;
      }
      if (state.view !== view || state.current !== f.conversation_id) return;
      if (data) foldLive(f, data);
      else if (f.text) note(visible(f.text));
    }).catch(() => {
      // The page is no worse than before: the messages stay unfolded.
      if (f.text) note(visible(f.text));
    });
  }

  function foldLive(f, data) {
    const box = $('messages');
    const sid = Number(f.summary_id);
    if (box.querySelector('[data-id="' + sid + '"]')) return; // opened after it was stored
    const msgs = data.messages || [];
    const sums = new Map();
    for (const m of msgs) if (m.role === 'summary') sums.set(m.id, m);
    const s = sums.get(sid) || { id: sid, role: 'summary', text: '', covers_from: f.covers_from, covers_to: f.covers_to,
      compaction: { method: f.method, messages: f.messages } };
    const from = s.covers_from;
    const to = s.covers_to;
    const missing = adopt(msgs, s);
    const kids = [...box.children];
    let first = -1;
    let last = -1;
    for (let i = 0; i < kids.length; i++) {
      const d = kids[i].dataset;
      if (!d.id) continue;
      if (Number(d.from || d.id) >= from && Number(d.to || d.id) <= to) {
        if (first < 0) first = i;
        last = i;
      }
    }
    const stick = atBottom();
    if (missing) {
      // Some of them never reached the page (frames missed while it was
      // disconnected): the covered part is laid out from the store.
      const part = msgs.filter((m) => (m.role === 'summary' ? m.covers_from >= from && m.covers_to <= to : m.id >= from && m.id <= to));
      if (!sums.has(sid)) part.unshift(s);
      const after = last >= 0 ? kids[last].nextSibling : box.firstChild;
      for (let i = first; first >= 0 && i <= last; i++) kids[i].remove();
      box.insertBefore(buildMessages(part, approvalsByCall(data), { id: sid, text: f.text }), after);
    } else {
      const card = summaryItem(s, f.text, false);
      box.insertBefore(card.li, first >= 0 ? kids[first] : box.firstChild);
      for (let i = first; first >= 0 && i <= last; i++) {
        const kid = kids[i];
        const inner = kid.classList.contains('summary') && kid.querySelector(':scope > details > .fold-list');
        const old = inner && sums.get(Number(kid.dataset.id));
        if (!old) {
          card.list.append(kid);
          continue;
        }
        // An earlier card: its messages join this one's, and it stays
        // among them where it was made.
        card.list.append(...inner.children);
        kid.remove();
        card.list.append(summaryItem(old, '', true).li);
      }
    }
    if (stick) box.scrollTop = box.scrollHeight;
  }

  // adopt gives the messages shown live the ids of the stored messages they
  // show: tool cards by call id, user and assistant messages by role and
  // text, in order. It says whether a message s covers has nothing on the
  // page.
  function adopt(msgs, s) {
    const box = $('messages');
    const have = new Set();
    for (const e of box.querySelectorAll('[data-id]')) have.add(Number(e.dataset.id));
    const byText = new Map(); // role + text → {items: [[position, li]], next}
    let pos = 0;
    for (const li of box.children) {
      pos++;
      if (li.dataset.id || !rawText.has(li)) continue;
      const key = (li.classList.contains('user') ? 'u' : 'a') + rawText.get(li);
      let q = byText.get(key);
      if (!q) byText.set(key, (q = { items: [], next: 0 }));
      q.items.push([pos, li]);
    }
    let at = 0;
    let missing = false;
    for (const m of msgs) {
      if (have.has(m.id) || m.id === s.id) continue;
      let li = null;
      if (m.role === 'tool') {
        const c = state.cards.get(m.call_id);
        if (c && !c.li.dataset.id) li = c.li;
      } else if ((m.role === 'user' || m.role === 'assistant') && m.text) {
        const q = byText.get((m.role === 'user' ? 'u' : 'a') + m.text);
        while (q && q.next < q.items.length && q.items[q.next][0] <= at) q.next++;
        if (q && q.next < q.items.length) {
          const [p, x] = q.items[q.next++];
          at = p;
          li = x;
        }
      } else if (m.role !== 'summary') continue; // an assistant message that only called tools
      if (li) li.dataset.id = m.id;
      else if (m.role === 'summary' ? m.covers_from >= s.covers_from && m.covers_to <= s.covers_to :
        m.id >= s.covers_from && m.id <= s.covers_to) missing = true;
    }
    return missing;
  }

  function approvalText(status, by) {
    switch (status) {
      case 'approved': return 'Approved' + (by === 'user' ? ' by you' : '');
      case 'denied': return 'Denied' + (by === 'user' ? ' by you' : '');
      case 'expired': return 'Approval expired: denied';
      case 'canceled': return 'Approval canceled';
      case 'pending': return 'Waiting for your approval…';
    }
    return status;
  }

  // ------------------------------------------------------------- messages

  function atBottom() {
    const b = $('messages');
    return b.scrollHeight - b.scrollTop - b.clientHeight < 80;
  }

  function append(li) {
    const stick = atBottom();
    $('messages').append(li);
    if (stick) $('messages').scrollTop = $('messages').scrollHeight;
  }

  function userItem(text) {
    const li = el('li', 'msg user');
    li.append(el('div', 'msg-role', 'You'), el('div', 'msg-body', visible(text)));
    return li;
  }

  function assistantItem(text, streaming) {
    const li = el('li', 'msg assistant' + (streaming ? ' streaming' : ''));
    const body = el('div', 'msg-body md');
    li.append(el('div', 'msg-role', 'buddy'), body);
    if (text) body.append(md.render(text));
    return { li, body };
  }

  function note(text, isErr) {
    append(el('li', 'msg note' + (isErr ? ' err' : ''), text));
  }

  // leftOut says what a request left out to fit the model's window. A
  // notice that says the same as the last moves down to this turn.
  function leftOut(f) {
    const text = f.text || 'To fit the model\'s context window, this request leaves out ' + (f.left_out || []).join('; ') + '.';
    const last = state.leftOut;
    if (last && last.text === text && last.li.isConnected) {
      last.li.remove();
      append(last.li);
      return;
    }
    const li = el('li', 'msg note notice', visible(text));
    state.leftOut = { text, li };
    append(li);
  }

  // A streamed answer: deltas are kept until the next animation frame,
  // then handed to a markdown.js Stream together, which lays out only what
  // is new (finished blocks keep their elements; the unfinished last line is
  // laid out again). A message costs its length, not its length per delta.
  // The browser still lays out a growing paragraph or code block whole, so
  // after each update the page rests twice as long as the update took
  // (layout included) before the next: at most a third of the time goes to
  // showing the stream, whatever its shape.
  function onDelta(text) {
    if (!state.stream) {
      const { li, body } = assistantItem('', true);
      state.stream = { li, body, md: new md.Stream(body), text: '', pending: [], scheduled: false, rest: 0 };
      append(li);
    }
    const s = state.stream;
    s.text += text;
    s.pending.push(text);
    if (s.scheduled) return;
    s.scheduled = true;
    const frame = () => requestAnimationFrame(() => {
      s.scheduled = false;
      if (state.stream !== s) return; // finished, or another conversation opened
      const t0 = performance.now();
      const stick = atBottom();
      flushStream(s);
      if (stick) $('messages').scrollTop = $('messages').scrollHeight;
      else void s.body.offsetHeight; // lay out now, to count it
      const t1 = performance.now();
      s.rest = t1 + 2 * (t1 - t0);
    });
    const wait = s.rest - performance.now();
    if (wait > 1) setTimeout(frame, wait);
    else frame();
  }

  function flushStream(s) {
    if (!s.pending.length) return;
    const text = s.pending.length === 1 ? s.pending[0] : s.pending.join('');
    s.pending = [];
    s.md.push(text);
  }

  // finishStream ends the streamed message with its final text (null:
  // keep what was streamed). The same text as streamed keeps the elements
  // laid out so far; another is laid out afresh.
  function finishStream(text) {
    const s = state.stream;
    if (!s) {
      if (text) {
        const { li } = assistantItem(text, false);
        rawText.set(li, text);
        append(li);
      }
      return;
    }
    state.stream = null;
    s.li.classList.remove('streaming');
    rawText.set(s.li, text === null ? s.text : text);
    if (text === null || text === s.text) {
      flushStream(s);
      s.md.end();
    } else {
      s.body.replaceChildren(md.render(text));
    }
  }

  // ---------------------------------------------------------------- cards

  function makeCard(f) {
    const li = el('li', 'msg tool');
    const card = el('section', 'card');
    card.setAttribute('aria-label', 'Tool call ' + f.skill);
    const head = el('div', 'card-head');
    const skill = state.skills.get(f.skill);
    const level = skill ? skill.permission_level : 'unknown';
    const status = el('span', 'status', 'running…');
    status.setAttribute('role', 'status');
    head.append(el('span', 'card-skill', visible(f.skill)), el('span', 'level ' + level, level), status);
    const args = el('details');
    args.append(el('summary', null, 'Arguments'), folded(pretty(f.arguments), 2000));
    args.open = JSON.stringify(f.arguments || {}).length < 300;
    const apNote = el('div', 'small ap-note');
    const result = el('div', 'result');
    card.append(head, args, apNote, result);
    li.append(card);
    const c = { li, status, result, apNote, callID: f.call_id };
    if (f.call_id) state.cards.set(f.call_id, c);
    return c;
  }

  function upsertCard(f) {
    let c = state.cards.get(f.call_id);
    if (!c) {
      c = makeCard(f);
      append(c.li);
    }
    if (f.type === 'tool_result') fillResult(c, f);
  }

  function fillResult(c, f) {
    c.result.replaceChildren();
    if (f.ok) {
      c.status.textContent = 'done' + (f.duration_ms ? ' in ' + f.duration_ms.toFixed(1) + ' ms' : '');
      c.status.className = 'status ok';
      const text = pretty(f.result);
      const d = el('details');
      d.open = text.length < 2000;
      d.append(el('summary', null, 'Result (' + fmtBytes(text.length) + ')'), folded(text, 2000));
      c.result.append(d);
    } else if (f.ok === false) {
      const e = f.error || {};
      c.status.textContent = 'failed: ' + (e.kind || 'error');
      c.status.className = 'status fail';
      c.result.append(el('div', 'error small', visible((e.kind ? e.kind + ': ' : '') + (e.detail || ''))));
    }
  }

  function setCardNote(c, text, cls) {
    c.apNote.textContent = text;
    c.apNote.className = 'small ap-note ' + (cls ? 'status ' + cls : '');
  }

  function cardNote(callID, text, cls) {
    const c = state.cards.get(callID);
    if (c) setCardNote(c, text, cls);
  }

  // ---------------------------------------------------------------- meter

  // The conversation's tokens: how full the model's window was at the last
  // request ("3.1k / 8.2k tokens"), the totals in the title.
  function kTokens(n) {
    n = Number(n) || 0;
    if (n < 1000) return String(n);
    if (n < 10000) return (n / 1000).toFixed(1).replace(/\.0$/, '') + 'k';
    if (n < 1e6) return Math.round(n / 1000) + 'k';
    return (n / 1e6).toFixed(1).replace(/\.0$/, '') + 'M';
  }

  function dollars(x) {
    return '$' + (x >= 1 ? x.toFixed(2) : x.toFixed(4));
  }

  // setUsage takes a conversation's usage (GET /api/conversations/{id}).
  function setUsage(u) {
    state.usage = u && u.requests > 0 ? Object.assign({}, u) : null;
    renderMeter();
  }

  // addUsage adds a turn's usage (done.usage) to the conversation's.
  function addUsage(t) {
    if (!t || !(t.requests > 0)) return;
    const u = state.usage || {};
    for (const k of ['requests', 'prompt_tokens', 'completion_tokens', 'cached_tokens', 'cost_usd']) u[k] = (u[k] || 0) + (t[k] || 0);
    if (t.context_tokens > 0) {
      u.context_tokens = t.context_tokens;
      u.estimated = !!t.estimated;
    }
    if (t.window_tokens > 0) u.window_tokens = t.window_tokens;
    state.usage = u;
    renderMeter();
  }

  function renderMeter() {
    const u = state.usage;
    const box = $('meter');
    if (!u || !(u.window_tokens > 0)) {
      box.hidden = true;
      return;
    }
    const used = u.context_tokens || 0;
    const win = u.window_tokens;
    const bar = $('meter-bar');
    bar.max = win;
    bar.low = Math.round(win / 2);
    bar.high = Math.round(win * 0.75); // about where the oldest turns get summarised
    bar.optimum = 0;
    bar.value = Math.min(used, win);
    const about = u.estimated ? '≈' : '';
    const cost = u.cost_usd > 0 ? dollars(u.cost_usd) : '';
    $('meter-text').textContent = about + kTokens(used) + ' / ' + kTokens(win) + ' tokens' + (cost ? ' · ' + cost : '');
    const n = (x) => (Number(x) || 0).toLocaleString('en');
    box.title = 'The last request took ' + about + n(used) + ' of the model\'s ' + n(win) + ' tokens (' + Math.round(100 * used / win) + '%).\n' +
      'This conversation: ' + n(u.requests) + ' request' + (u.requests === 1 ? '' : 's') + ', ' + n(u.prompt_tokens) + ' prompt tokens (' +
      n(u.cached_tokens) + ' cached), ' + n(u.completion_tokens) + ' completion tokens' + (cost ? ', ' + cost : '') + '.' +
      (u.estimated ? '\n≈ buddy estimated the figures: the provider reported none.' : '');
    box.hidden = false;
  }

  // ------------------------------------------------------------- composer

  function updateComposer() {
    const running = state.current && state.running.has(state.current);
    $('send').disabled = !!running;
    $('cancel').hidden = !running;
  }

  $('composer').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ta = $('composer-text');
    const text = ta.value.trim();
    if (!text || (state.current && state.running.has(state.current))) return;
    if (!state.current) {
      try {
        const data = await api('POST', '/api/conversations', { title: text.slice(0, 80) });
        setCurrent(data.conversation_id);
        wsSend({ type: 'subscribe', conversation_id: data.conversation_id });
        loadConversations();
      } catch (e) {
        banner('Could not start a conversation: ' + e.message);
        return;
      }
    }
    ta.value = '';
    const li = userItem(text);
    rawText.set(li, text);
    append(li);
    $('messages').scrollTop = $('messages').scrollHeight;
    state.running.add(state.current);
    updateComposer();
    if (!wsSend({ type: 'send', conversation_id: state.current, text })) {
      state.running.delete(state.current);
      updateComposer();
    }
  });

  $('composer-text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $('composer').requestSubmit();
    }
  });

  $('cancel').addEventListener('click', () => {
    if (state.current) wsSend({ type: 'cancel', conversation_id: state.current });
  });

  function banner(text) {
    $('banner').textContent = text;
    $('banner').hidden = false;
  }
  function clearBanner() {
    $('banner').hidden = true;
    $('banner').textContent = '';
  }

  // ------------------------------------------------------------- approval

  const ARM_MS = 800; // Approve stays disabled this long after the dialog opens
  let countdown = null;
  let armTimer = null;
  let dialogExpired = false;

  function showNextApproval() {
    updateBadge();
    renderConversations();
    if (state.shown && state.approvals.has(state.shown)) return;
    if (dialogExpired) return; // the expired notice stays until closed
    const next = state.approvals.values().next();
    if (next.done) {
      closeDialog();
      return;
    }
    openDialog(next.value);
  }

  // touched describes, in plain words, what the arguments point at.
  function touched(args) {
    const out = [];
    if (!args || typeof args !== 'object') return out;
    for (const [k, v] of Object.entries(args)) {
      if (typeof v !== 'string') continue;
      if (/(^|_)(path|file|dir|directory)$/i.test(k)) out.push('the file or directory ' + visible(v));
      else if (/(^|_)url$/i.test(k)) {
        let host = null;
        try { host = new URL(v).host; } catch (e) { host = null; }
        out.push(host ? 'the web host ' + visible(host) + ' (' + visible(v) + ')' : 'the address ' + visible(v));
      }
    }
    return out;
  }

  // targetText says what a resolved target is, in plain words.
  // credentialsText lists credentials as "github (api.github.com)".
  function credentialsText(cs) {
    return cs.map((c) => visible(c.name) + ' (' + (c.hosts || []).map(visible).join(', ') + ')').join('; ');
  }

  function targetText(t) {
    let s;
    if (t.kind === 'file') {
      s = (t.action || 'use') + ' ' + visible(t.path || '');
      if (t.action === 'create') s += ' (new file, ' + fmtBytes(t.bytes || 0) + ')';
      else if (t.action === 'overwrite') s += ' (replacing ' + fmtBytes(t.size || 0) + ' with ' + fmtBytes(t.bytes || 0) + (t.diff ? ', ' + visible(t.diff) : '') + ')';
      else if (t.exists) s += ' (' + fmtBytes(t.size || 0) + ')';
      else s += ' (does not exist)';
    } else if (t.kind === 'url') {
      s = visible(t.method || 'GET') + ' ' + visible(t.url || '') + ' from ' + visible(t.host || '') + (t.port ? ':' + t.port : '');
      if (t.body_bytes) s += ' with a body of ' + fmtBytes(t.body_bytes);
      const addrs = (t.addresses || []).map((x) => visible(x.ip) + (x.allowed ? '' : ' (refused)'));
      if (addrs.length) s += ', which resolves to ' + addrs.join(', ');
      else if (t.unresolved) s += ' (does not resolve now: ' + visible(t.unresolved) + ')';
    } else {
      s = 'may ' + visible(t.capability || t.kind || '');
    }
    if (t.refused) s += ' — refused: ' + visible(t.refused);
    return s;
  }

  function openDialog(a) {
    const dlg = $('approval');
    state.shown = a.id;
    dialogExpired = false;
    $('ap-skill').textContent = visible(a.skill_name);
    $('ap-level').textContent = a.permission_level;
    // The module that runs if approved: an answer applies to it only.
    $('ap-module').hidden = !a.version && !a.module_sha256;
    $('ap-version').textContent = a.version ? visible(a.version) : 'unknown';
    $('ap-sha-part').hidden = !a.module_sha256;
    $('ap-sha').textContent = visible(String(a.module_sha256 || '').slice(0, 12));
    $('ap-sha').title = a.module_sha256 ? 'sha256 ' + visible(a.module_sha256) : '';
    const where = touched(a.arguments);
    $('approval-what').textContent = visible(a.skill_name) + ' wants to run' +
      (where.length ? ' on ' + where.join(' and ') : '') + '. Nothing runs unless you approve.';
    const conv = state.convs.find((c) => c.id === a.conversation_id);
    $('ap-conv').textContent = a.conversation_id === state.current ? '' :
      'In another conversation: ' + visible(conv ? conv.title || a.conversation_id : a.conversation_id);
    const n = state.approvals.size;
    $('ap-queue').textContent = n > 1 ? '(' + n + ' requests waiting)' : '';
    const reason = $('ap-reason');
    reason.textContent = a.reason ? visible(a.reason) : '';
    reason.hidden = !a.reason;
    const t = $('ap-touches');
    t.replaceChildren();
    for (const tg of a.targets || []) t.append(el('li', tg.refused ? 'refused' : null, targetText(tg)));
    if (!(a.targets || []).length) for (const w of where) t.append(el('li', null, w));
    for (const g of a.touches || []) t.append(el('li', null, 'may ' + visible(g)));
    if ((a.credentials || []).length) t.append(el('li', 'credentials', 'buddy adds the credentials ' + credentialsText(a.credentials) + ' (the skill never sees them)'));
    if (!t.childNodes.length) t.append(el('li', 'muted', 'nothing named in its arguments or grants'));
    const dl = $('ap-args');
    dl.replaceChildren();
    if (a.arguments && typeof a.arguments === 'object' && !Array.isArray(a.arguments)) {
      const keys = Object.keys(a.arguments);
      if (!keys.length) dl.append(el('dd', 'muted', '(no arguments)'));
      for (const k of keys) {
        const v = a.arguments[k];
        dl.append(el('dt', null, visible(k)));
        const dd = el('dd');
        const text = pretty(v);
        if (typeof v === 'string') dd.append(el('div', 'folded-note', fmtBytes(new TextEncoder().encode(v).length) + ', ' + (countLines(v) - (v.endsWith('\n') ? 1 : 0)) + ' line(s)'));
        dd.append(folded(text, 600));
        dl.append(dd);
      }
    } else {
      dl.append(el('dd'), folded(pretty(a.arguments), 600));
    }
    $('ap-state').textContent = '';
    $('ap-state').className = 'ap-state';
    $('ap-approve').hidden = false;
    $('ap-deny').hidden = false;
    $('ap-close').hidden = true;
    $('ap-deny').disabled = false;
    $('ap-approve').disabled = true;
    clearTimeout(armTimer);
    armTimer = setTimeout(() => { if (state.shown === a.id && !dialogExpired) $('ap-approve').disabled = false; }, ARM_MS);
    tick();
    clearInterval(countdown);
    countdown = setInterval(tick, 250);
    if (!dlg.open) dlg.showModal();
    $('ap-deny').focus();
    updateBadge();
  }

  function tick() {
    const a = state.approvals.get(state.shown);
    if (!a) return;
    const left = Math.max(0, Math.round((Date.parse(a.expires_at) - Date.now()) / 1000));
    const mm = Math.floor(left / 60);
    const ss = String(left % 60).padStart(2, '0');
    $('ap-countdown').textContent = left > 0 ? 'Expires in ' + mm + ':' + ss + ': no answer by then means deny.' : 'Expiring now…';
    if (left === 0) $('ap-approve').disabled = true;
  }

  function showExpired(text) {
    dialogExpired = true;
    clearInterval(countdown);
    $('ap-state').textContent = text;
    $('ap-state').className = 'ap-state expired';
    $('ap-countdown').textContent = '';
    $('ap-approve').hidden = true;
    $('ap-deny').hidden = true;
    $('ap-close').hidden = false;
    $('ap-close').focus();
  }

  function closeDialog() {
    clearInterval(countdown);
    clearTimeout(armTimer);
    state.shown = null;
    dialogExpired = false;
    const dlg = $('approval');
    if (dlg.open) dlg.close();
    updateBadge();
  }

  function onResolved(f) {
    const a = state.approvals.get(f.id);
    state.approvals.delete(f.id);
    const mine = state.answered.delete(f.id);
    if (f.conversation_id === state.current && a) {
      let text;
      if (f.reason === 'timeout') text = 'Approval expired: nobody answered in time, so it was denied';
      else if (f.reason === 'canceled') text = 'Approval canceled';
      else text = (f.approved ? 'Approved' : 'Denied') + (mine ? ' by you' : ' in another tab');
      cardNote(a.call_id, text, f.approved ? 'ok' : 'fail');
    }
    if (state.shown === f.id) {
      if (f.reason === 'timeout') {
        showExpired('Expired: nobody answered in time, so ' + (a ? visible(a.skill_name) : 'the call') + ' was denied.');
        updateBadge();
        renderConversations();
        return;
      }
      state.shown = null;
      if (!mine) {
        // Answered elsewhere: say so where the user was looking.
        const msg = f.reason === 'canceled' ? 'The call was canceled.' : 'Answered in another tab (' + (f.approved ? 'approved' : 'denied') + ').';
        setConn(msg, false);
      }
    }
    showNextApproval();
  }

  async function answer(approved) {
    const a = state.approvals.get(state.shown);
    if (!a || dialogExpired) return;
    if (approved && $('ap-approve').disabled) return;
    $('ap-approve').disabled = true;
    $('ap-deny').disabled = true;
    state.answered.add(a.id);
    try {
      await api('POST', '/api/chat/' + encodeURIComponent(a.conversation_id) + '/approve',
        { approval_id: a.id, approved, arguments_hash: a.arguments_hash });
      $('ap-state').textContent = approved ? 'Approved.' : 'Denied.';
    } catch (e) {
      state.answered.delete(a.id);
      if (e.status === 410) showExpired('Expired: this request can no longer be answered; the call was denied.');
      else if (e.status === 409 || e.status === 404) {
        state.approvals.delete(a.id);
        state.shown = null;
        showNextApproval();
      } else {
        $('ap-state').textContent = 'Could not answer: ' + e.message;
        $('ap-deny').disabled = false;
        $('ap-approve').disabled = false;
      }
    }
  }

  $('ap-approve').addEventListener('click', () => answer(true));
  $('ap-deny').addEventListener('click', () => answer(false));
  $('ap-close').addEventListener('click', () => {
    const id = state.shown;
    dialogExpired = false;
    state.shown = null;
    state.approvals.delete(id);
    closeDialog();
    showNextApproval();
    $('composer-text').focus();
  });
  $('approval').addEventListener('cancel', (ev) => {
    // Esc: deny (or close the expired notice); the dialog never just vanishes.
    ev.preventDefault();
    if (dialogExpired) $('ap-close').click();
    else answer(false);
  });
  $('approval').addEventListener('keydown', (ev) => {
    if (ev.repeat || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const k = ev.key.toLowerCase();
    if (k === 'a') { ev.preventDefault(); answer(true); }
    else if (k === 'd') { ev.preventDefault(); answer(false); }
  });

  // The tab says when an approval waits: title and favicon.
  function updateBadge() {
    const n = state.approvals.size;
    document.title = n ? '(' + n + ') Approval needed · buddy' : 'buddy';
    const icon = $('favicon');
    const want = n ? 'favicon-alert.svg' : 'favicon.svg';
    if (!icon.href.endsWith(want)) icon.href = want;
  }

  boot();
  // ---------------------------------------------------------------- audit
  async function loadAudit() {
    const list = $('audit-list');
    list.replaceChildren();
    if (!state.current) {
      list.append(el('li', 'muted', 'Open a conversation to see its audit trail.'));
      return;
    }
    let data;
    try {
      data = await api('GET', '/api/audit?conversation=' + encodeURIComponent(state.current));
    } catch (e) {
      list.append(el('li', 'error', 'Could not load the audit trail.'));
      return;
    }
    const rows = data.audit || [];
    if (!rows.length) list.append(el('li', 'muted', 'Nothing recorded yet.'));
    for (const r of rows) {
      const li = el('li', r.outcome === 'ok' ? null : 'refused');
      const when = new Date(r.time).toLocaleTimeString();
      li.append(el('strong', null, visible(r.skill || r.kind)));
      li.append(el('span', 'muted', ' ' + when + ' · ' + visible(r.kind) + ' · ' + visible(r.outcome) + (r.asked ? ' · asked' : '')));
      const touched = [].concat(r.paths || [], r.hosts || []).map(visible);
      if (touched.length) li.append(el('div', 'small', 'touched: ' + touched.join(', ')));
      if (r.bytes_read || r.bytes_written) li.append(el('div', 'small muted', fmtBytes(r.bytes_read || 0) + ' read, ' + fmtBytes(r.bytes_written || 0) + ' written'));
      list.append(li);
    }
  }

  $('audit-toggle').addEventListener('click', () => {
    const open = $('audit').hidden;
    $('audit').hidden = !open;
    $('audit-toggle').setAttribute('aria-expanded', String(open));
    if (open) {
      closePanels('audit');
      loadAudit();
      $('audit-title').setAttribute('tabindex', '-1');
      $('audit-title').focus();
    }
  });

  // ------------------------------------------------------------ schedule

  // Reminders, checks and the heartbeat (GET|POST /api/schedule, DELETE
  // /api/schedule/{id}), what they delivered (notification frames), and
  // today's spend against each [budget] cap. Everything shown is text.
  const notes = [];
  let unseen = 0;

  function onNotification(f) {
    notes.unshift(f);
    if (notes.length > 50) notes.pop();
    if ($('schedule').hidden) {
      unseen++;
      $('notes-count').textContent = String(unseen);
      $('notes-count').hidden = false;
    }
    renderNotes();
    if (f.conversation_id === state.current && !f.approval_id && !state.running.has(f.conversation_id)) openConversation(f.conversation_id);
    if (!$('schedule').hidden) loadSchedule();
    loadConversations();
  }

  function renderNotes() {
    const list = $('notes-list');
    list.replaceChildren();
    if (!notes.length) {
      list.append(el('li', 'muted small', 'None yet.'));
      return;
    }
    for (const n of notes) {
      const li = el('li', n.approval_id ? 'held' : null);
      li.append(el('strong', null, visible(n.kind)));
      const due = n.due_at ? new Date(n.due_at).toLocaleString() : '';
      li.append(el('span', 'muted small', ' ' + due));
      li.append(el('div', 'note-text', visible(n.text)));
      const open = el('button', 'link small', 'open the conversation');
      open.type = 'button';
      open.addEventListener('click', () => openConversation(n.conversation_id));
      li.append(open);
      list.append(li);
    }
  }

  function fmtSpend(s, unit) {
    if (!s) return '';
    let t = s.tokens.toLocaleString() + ' tokens';
    if (s.tokens_cap) t += ' of ' + s.tokens_cap.toLocaleString();
    if (s.usd || s.usd_cap) t += ' · $' + (s.usd || 0).toFixed(4) + (s.usd_cap ? ' of $' + s.usd_cap.toFixed(2) : '');
    return unit + ': ' + t;
  }

  async function loadSchedule() {
    let data;
    try {
      data = await api('GET', '/api/schedule');
    } catch (e) {
      $('jobs-list').replaceChildren(el('li', 'muted small', 'The schedule cannot be read: ' + e.message));
      return;
    }
    const b = data.budget;
    const spend = $('spend');
    spend.replaceChildren();
    if (b) {
      spend.append(el('div', null, fmtSpend(b.day, 'Today')));
      spend.append(el('div', null, fmtSpend(b.month, 'This month')));
      const caps = [];
      if (b.turn_tokens_cap) caps.push(b.turn_tokens_cap.toLocaleString() + ' tokens a turn');
      if (b.turn_usd_cap) caps.push('$' + b.turn_usd_cap.toFixed(2) + ' a turn');
      if (b.job_per_day_tokens_cap) caps.push(b.job_per_day_tokens_cap.toLocaleString() + ' tokens a job a day');
      if (b.job_per_day_usd_cap) caps.push('$' + b.job_per_day_usd_cap.toFixed(2) + ' a job a day');
      spend.append(el('div', 'muted', caps.length ? 'Caps: ' + caps.join(', ') : 'No cap per turn or per job ([budget] in buddy.toml).'));
    }
    const list = $('jobs-list');
    list.replaceChildren();
    const jobs = data.jobs || [];
    if (!jobs.length) list.append(el('li', 'muted small', 'No jobs.'));
    for (const j of jobs) {
      const li = el('li', j.stopped_by ? 'refused' : null);
      const head = el('div');
      head.append(el('strong', null, visible(j.kind)));
      let when = j.every ? 'every ' + j.every : j.cron ? 'cron ' + j.cron + ' (' + j.time_zone + ')' : j.at ? 'at ' + new Date(j.at).toLocaleString() : '';
      head.append(el('span', 'muted small', ' ' + visible(when)));
      li.append(head);
      li.append(el('div', 'note-text', visible(j.text || j.prompt || '')));
      const next = j.next_run ? 'next ' + new Date(j.next_run).toLocaleString() : 'done';
      let status = next + (j.last_status ? ' · last: ' + j.last_status.replaceAll('_', ' ') : '');
      if (j.stopped_by) status += ' · stopped by [budget] ' + j.stopped_by + (j.stopped_until ? ' until ' + new Date(j.stopped_until).toLocaleString() : '');
      li.append(el('div', 'small muted', visible(status)));
      if (j.spent_today) li.append(el('div', 'small muted', fmtSpend(j.spent_today, 'Today')));
      if (j.id !== 'heartbeat') {
        const rm = el('button', 'danger small', 'Remove');
        rm.type = 'button';
        rm.setAttribute('aria-label', 'Remove ' + j.kind + ' ' + j.id);
        rm.addEventListener('click', async () => {
          try { await api('DELETE', '/api/schedule/' + encodeURIComponent(j.id)); } catch (e) { /* listed again below */ }
          loadSchedule();
        });
        li.append(rm);
      }
      list.append(li);
    }
  }

  $('job-kind').addEventListener('change', () => {
    $('job-text-label').textContent = $('job-kind').value === 'reminder' ? 'Text' : 'Prompt';
    if ($('job-kind').value === 'reminder') $('job-when').value = 'at';
  });
  $('job-when').addEventListener('change', () => {
    const w = $('job-when').value;
    if (w !== 'at') $('job-kind').value = 'check', $('job-text-label').textContent = 'Prompt';
    $('job-time').placeholder = { at: '+30m or 2026-12-01T08:00:00+01:00', every: '30m, 24h', cron: '0 8 * * 1-5' }[w];
  });
  $('job-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const kind = $('job-kind').value;
    const body = { kind };
    body[$('job-when').value] = $('job-time').value.trim();
    body[kind === 'reminder' ? 'text' : 'prompt'] = $('job-text').value;
    try {
      await api('POST', '/api/schedule', body);
      $('job-error').hidden = true;
      $('job-time').value = '';
      $('job-text').value = '';
    } catch (e) {
      $('job-error').textContent = e.kind + ': ' + e.message;
      $('job-error').hidden = false;
    }
    loadSchedule();
  });

  $('schedule-toggle').addEventListener('click', () => {
    const open = $('schedule').hidden;
    $('schedule').hidden = !open;
    $('schedule-toggle').setAttribute('aria-expanded', String(open));
    if (open) {
      closePanels('schedule');
      unseen = 0;
      $('notes-count').hidden = true;
      loadSchedule();
      $('schedule-title').setAttribute('tabindex', '-1');
      $('schedule-title').focus();
    }
  });

  // ------------------------------------------------------------- channels

  // The chat channels (GET /api/channels) and their pairing (GET
  // /api/pairing, POST /api/pairing/approve and /revoke). The toggle shows
  // only when a channel is configured; its count is the pairing codes
  // waiting. Everything shown is text: names come from strangers.
  function ago(iso) {
    if (!iso) return 'never';
    const s = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    return new Date(iso).toLocaleString();
  }

  async function loadChannels() {
    let chans, pairs;
    try {
      [chans, pairs] = await Promise.all([api('GET', '/api/channels'), api('GET', '/api/pairing')]);
    } catch (e) {
      $('channel-status').replaceChildren(el('li', 'muted small', 'The channels cannot be read: ' + e.message));
      return;
    }
    const list = chans.channels || [];
    $('channels-toggle').hidden = list.length === 0;
    const pending = pairs.pending || [];
    $('pairing-count').textContent = String(pending.length);
    $('pairing-count').hidden = pending.length === 0;
    if ($('channels').hidden) return;
    const status = $('channel-status');
    status.replaceChildren();
    for (const c of list) {
      const li = el('li', c.error ? 'refused' : null);
      const head = el('div');
      head.append(el('strong', null, visible(c.name)));
      head.append(el('span', 'small', ' ' + c.state.replaceAll('_', ' ')));
      li.append(head);
      li.append(el('div', 'small muted', 'last success ' + ago(c.last_success) + (c.lag_ms ? ' · lag ' + c.lag : '') +
        (c.restarts ? ' · the watchdog restarted the poll ' + c.restarts + '×' : '')));
      if (c.error) li.append(el('div', 'small err', visible(c.error)));
      li.append(el('div', 'small muted', c.inbox + ' to handle · ' + c.outbox + ' to send · dm_policy ' + c.dm_policy +
        ' · ' + c.paired + ' paired'));
      status.append(li);
    }
    const pl = $('pairing-pending');
    pl.replaceChildren();
    if (!pending.length) pl.append(el('li', 'muted small', 'None waiting.'));
    for (const p of pending) {
      const li = el('li');
      const who = el('div');
      who.append(el('strong', null, visible(p.name || 'user ' + p.user)));
      who.append(el('span', 'muted small', ' ' + visible(p.channel) + ' user ' + visible(p.user)));
      li.append(who);
      const code = el('div', 'small', 'code ');
      code.append(el('code', null, p.code));
      if (p.expires_at) code.append(el('span', 'muted', ' · expires ' + new Date(p.expires_at).toLocaleTimeString()));
      li.append(code);
      const ok = el('button', 'primary small', 'Approve');
      ok.type = 'button';
      ok.setAttribute('aria-label', 'Approve ' + (p.name || p.user) + ' (code ' + p.code + ')');
      ok.addEventListener('click', () => pairingAction('approve', { code: p.code }));
      const no = el('button', 'danger small', 'Refuse');
      no.type = 'button';
      no.setAttribute('aria-label', 'Refuse the code ' + p.code);
      no.addEventListener('click', () => pairingAction('revoke', { channel: p.channel, code: p.code }));
      li.append(ok, no);
      pl.append(li);
    }
    const paired = pairs.paired || [];
    const dl = $('pairing-paired');
    dl.replaceChildren();
    if (!paired.length) dl.append(el('li', 'muted small', 'Nobody yet (users of allow_from need no pairing).'));
    for (const p of paired) {
      const li = el('li');
      const who = el('div');
      who.append(el('strong', null, visible(p.name || 'user ' + p.user)));
      who.append(el('span', 'muted small', ' ' + visible(p.channel) + ' user ' + visible(p.user) +
        (p.paired_at ? ' · since ' + new Date(p.paired_at).toLocaleString() : '')));
      li.append(who);
      const rm = el('button', 'danger small', 'Revoke');
      rm.type = 'button';
      rm.setAttribute('aria-label', 'Revoke ' + (p.name || p.user));
      rm.addEventListener('click', () => {
        // Two clicks: the first asks.
        if (rm.textContent !== 'Revoke?') { rm.textContent = 'Revoke?'; return; }
        pairingAction('revoke', { channel: p.channel, user: p.user });
      });
      li.append(rm);
      dl.append(li);
    }
  }

  async function pairingAction(what, body) {
    try {
      await api('POST', '/api/pairing/' + what, body);
      $('pairing-error').hidden = true;
    } catch (e) {
      $('pairing-error').textContent = e.kind + ': ' + e.message;
      $('pairing-error').hidden = false;
    }
    loadChannels();
  }

  $('channels-toggle').addEventListener('click', () => {
    const open = $('channels').hidden;
    $('channels').hidden = !open;
    $('channels-toggle').setAttribute('aria-expanded', String(open));
    clearInterval(channelTimer);
    channelTimer = setInterval(loadChannels, open ? 5000 : 60000);
    if (open) {
      closePanels('channels');
      loadChannels();
      $('channels-title').setAttribute('tabindex', '-1');
      $('channels-title').focus();
    }
  });
})();
