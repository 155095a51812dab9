// The conveyor playground: a chat over /v1/ws, sampling controls, and the
// engine's figures from /metrics. No framework, no build step: the server
// embeds this file as it is (http/playground/embed_assets.cmake).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  const state = {
    key: null,              // the API key, when the server wants one (memory only)
    ws: null,               // the open WebSocket
    connecting: null,       // a Promise of the WebSocket being opened
    conversation: [],       // the chat's messages, as /v1/ws takes them
    inflight: null,         // {id, li, text, userTurn, stopping}
    nextId: 1,
    lastGenerated: null,    // {tokens, at}: for tokens/s between two polls
  };

  // ---- small helpers --------------------------------------------------------

  function authHeaders() {
    return state.key ? { Authorization: 'Bearer ' + state.key } : {};
  }

  // A browser cannot set headers on a WebSocket handshake, so the key travels
  // as a subprotocol, "conveyor.key.<base64url of the key>", beside
  // "conveyor.v1", which the server answers with.
  function base64url(text) {
    let binary = '';
    for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  async function errorMessage(response) {
    try {
      const body = await response.json();
      if (body.error && body.error.message) return body.error.message;
    } catch (_) { /* not JSON */ }
    return response.status + ' ' + response.statusText;
  }

  function showError(message) {
    const p = $('error');
    p.textContent = message || '';
    p.hidden = !message;
  }

  function setConnection(text) {
    $('connection').textContent = text;
  }

  function setBusy(busy) {
    $('send').disabled = busy;
    $('stop').disabled = !busy;
    $('prompt').disabled = false;
  }

  // ---- the API key ------------------------------------------------------------

  // True when /v1/models answers with the key we have (or none is needed).
  async function loadModel() {
    const response = await fetch('/v1/models', { headers: authHeaders(), cache: 'no-store' });
    if (response.status === 401) return false;
    if (!response.ok) throw new Error(await errorMessage(response));
    const body = await response.json();
    $('model').textContent = body.data && body.data.length ? body.data[0].id : '(none)';
    return true;
  }

  function askForKey(message) {
    $('key-form').hidden = false;
    $('key-error').textContent = message || '';
    $('key').focus();
  }

  async function onKeySubmit(event) {
    event.preventDefault();
    state.key = $('key').value;
    try {
      if (!(await loadModel())) {
        state.key = null;
        return askForKey('The server did not accept this key.');
      }
    } catch (e) {
      return askForKey('Could not reach the server: ' + e.message);
    }
    $('key').value = '';
    $('key-form').hidden = true;
    ready();
  }

  function ready() {
    $('prompt').disabled = false;
    setBusy(false);
    $('prompt').focus();
  }

  // ---- the WebSocket ----------------------------------------------------------

  function connect() {
    if (state.ws && state.ws.readyState === WebSocket.OPEN) return Promise.resolve(state.ws);
    if (state.connecting) return state.connecting;
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/v1/ws';
    const protocols = ['conveyor.v1'];
    if (state.key) protocols.push('conveyor.key.' + base64url(state.key));
    setConnection('connecting…');
    const ws = new WebSocket(url, protocols);
    state.connecting = new Promise((resolve, reject) => {
      let opened = false;
      ws.onopen = () => {
        opened = true;
        state.ws = ws;
        state.connecting = null;
        setConnection('connected');
        resolve(ws);
      };
      ws.onmessage = (event) => onServerMessage(event.data);
      ws.onclose = (event) => {
        state.connecting = null;
        if (state.ws === ws) state.ws = null;
        setConnection('not connected');
        // A refused handshake (a wrong key, a draining server) shows no
        // status to a script: only that it closed before it opened.
        if (!opened) return reject(new Error('the WebSocket /v1/ws did not open'));
        endInflight('error', 'the connection closed (code ' + event.code + ')');
      };
    });
    return state.connecting;
  }

  function onServerMessage(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch (_) {
      return;
    }
    const run = state.inflight;
    if (!run || message.id !== run.id) return;
    if (message.type === 'delta') {
      if ((message.index || 0) !== 0) return;
      run.text += message.text || '';
      run.li.querySelector('.text').textContent = run.text;
      scrollToEnd();
    } else if (message.type === 'final') {
      if (message.finish_reason === 'error') {
        const reason = message.error && message.error.message ? message.error.message : 'the request failed';
        return endInflight('error', reason);
      }
      const tokens = message.usage ? message.usage.completion_tokens : undefined;
      const used = tokens === undefined ? '' : tokens + (tokens === 1 ? ' token' : ' tokens');
      if (message.finish_reason === 'cancelled') return endInflight('cancelled', 'stopped' + (used ? ' after ' + used : ''));
      endInflight('done', [message.finish_reason, used].filter(Boolean).join(' · '));
    } else if (message.type === 'error') {
      // The server refused the message (a bad field, no tokenizer, a limit).
      endInflight('error', message.error && message.error.message ? message.error.message : 'refused');
    }
  }

  // ---- the chat -----------------------------------------------------------------

  function addMessage(role, text) {
    const li = document.createElement('li');
    li.className = role;
    const who = document.createElement('span');
    who.className = 'role';
    who.textContent = role;
    const body = document.createElement('div');
    body.className = 'text';
    body.textContent = text;
    const note = document.createElement('span');
    note.className = 'note';
    li.append(who, body, note);
    $('messages').append(li);
    scrollToEnd();
    return li;
  }

  function scrollToEnd() {
    const list = $('messages');
    list.scrollTop = list.scrollHeight;
  }

  function numberField(id, parse) {
    const input = $(id);
    if (input.value.trim() === '') return undefined;
    const value = parse(input.value);
    return Number.isFinite(value) ? value : undefined;
  }

  // The sampling fields of a request; empty or unreadable ones are left out
  // (the server's defaults apply), out-of-range ones go to the server, which
  // says what is wrong.
  function samplingFields() {
    const fields = {
      temperature: numberField('temperature', parseFloat),
      top_p: numberField('top_p', parseFloat),
      max_tokens: numberField('max_tokens', (v) => parseInt(v, 10)),
      seed: numberField('seed', (v) => parseInt(v, 10)),
    };
    if ($('ignore_eos').checked) fields.ignore_eos = true;
    for (const name of Object.keys(fields)) if (fields[name] === undefined) delete fields[name];
    return fields;
  }

  async function send(event) {
    event.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || state.inflight) return;
    showError('');
    $('prompt').value = '';
    const userTurn = { role: 'user', content: text };
    state.conversation.push(userTurn);
    addMessage('user', text);
    const li = addMessage('assistant', '');
    li.dataset.state = 'streaming';
    li.setAttribute('aria-busy', 'true');
    const id = 'playground-' + state.nextId++;
    state.inflight = { id, li, text: '', userTurn, stopping: false };
    setBusy(true);
    const request = Object.assign({ id, messages: state.conversation.slice() }, samplingFields());
    try {
      const ws = await connect();
      ws.send(JSON.stringify(request));
    } catch (e) {
      endInflight('error', e.message);
    }
  }

  // The request ends: `outcome` is done, cancelled or error. A reply that
  // came (even a stopped one) stays in the conversation; a request that
  // failed takes its user message out of it, so the next one is not sent
  // after two user turns in a row.
  function endInflight(outcome, note) {
    const run = state.inflight;
    if (!run) return;
    state.inflight = null;
    run.li.dataset.state = outcome;
    run.li.removeAttribute('aria-busy');
    run.li.querySelector('.note').textContent = note || '';
    if (outcome === 'error') {
      state.conversation = state.conversation.filter((m) => m !== run.userTurn);
      run.li.previousElementSibling.querySelector('.note').textContent = 'not in the conversation';
    } else if (run.text) {
      state.conversation.push({ role: 'assistant', content: run.text });
    }
    setBusy(false);
    $('prompt').focus();
  }

  function stop() {
    const run = state.inflight;
    if (!run || run.stopping || !state.ws) return;
    run.stopping = true;
    run.li.querySelector('.note').textContent = 'stopping…';
    $('stop').disabled = true;
    state.ws.send(JSON.stringify({ type: 'cancel', id: run.id }));
  }

  // A request still running is cancelled and forgotten: its last events
  // belong to no conversation.
  function clearChat() {
    stop();
    state.inflight = null;
    setBusy(false);
    state.conversation = [];
    $('messages').replaceChildren();
    showError('');
  }

  // ---- the engine's figures -----------------------------------------------------

  // Prometheus text: "name value" per sample; labelled samples are left out.
  function parseMetrics(text) {
    const values = {};
    for (const line of text.split('\n')) {
      const match = /^([A-Za-z_:][A-Za-z0-9_:]*)\s+(\S+)/.exec(line);
      if (match) values[match[1]] = Number(match[2]);
    }
    return values;
  }

  function show(id, value) {
    $(id).textContent = value;
  }

  async function pollMetrics() {
    try {
      const response = await fetch('/metrics', { headers: authHeaders(), cache: 'no-store' });
      if (!response.ok) throw new Error(await errorMessage(response));
      const m = parseMetrics(await response.text());
      const generated = m['conveyor:generation_tokens_total'];
      show('m-running', m['conveyor:num_requests_running'] ?? '–');
      show('m-waiting', m['conveyor:num_requests_waiting'] ?? '–');
      const kv = m['conveyor:kv_cache_usage_ratio'];
      show('m-kv', kv === undefined ? '–' : (kv * 100).toFixed(1) + ' %');
      show('m-generated', generated ?? '–');
      const now = performance.now();
      if (state.lastGenerated && generated !== undefined) {
        const seconds = (now - state.lastGenerated.at) / 1000;
        show('m-rate', seconds > 0 ? ((generated - state.lastGenerated.tokens) / seconds).toFixed(1) : '–');
      }
      if (generated !== undefined) state.lastGenerated = { tokens: generated, at: now };
      show('metrics-status', 'from /metrics every 2 s');
      $('metrics-status').classList.remove('error');
    } catch (e) {
      show('metrics-status', '/metrics: ' + e.message);
      $('metrics-status').classList.add('error');
    }
    setTimeout(pollMetrics, 2000);
  }

  // ---- start --------------------------------------------------------------------

  async function start() {
    $('composer').addEventListener('submit', send);
    $('prompt').addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) send(event);
    });
    $('stop').addEventListener('click', stop);
    $('clear').addEventListener('click', clearChat);
    $('key-form').addEventListener('submit', onKeySubmit);
    $('sampling').addEventListener('submit', (event) => event.preventDefault());
    pollMetrics();
    try {
      if (!(await loadModel())) return askForKey();
    } catch (e) {
      showError('Could not reach the server: ' + e.message);
      return;
    }
    ready();
  }

  start();
})();
