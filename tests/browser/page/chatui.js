// A stand-in for the ChatUI front end (github.com/ChrisMcKee1/ChatUI), written for this test suite.
//
// It makes the same HTTP calls as the real page at two revisions (query parameter `rev`):
//   documented  941c581, the first commit, the revision its docs describe
//   current     eb435d2, HEAD
// and shows the replies the way each revision reads them. The real page is a Next.js app configured at build
// time; here the configuration comes from the query string:
//   api=<base URL>           STD = ${api}/chat-ui/chat, MA = ${api}/multi-agent-chat, HIST = ${api}/chat-history
//   responseMode=stream|batch  (documented only; the code's default is stream)
//
// Faithful on purpose, quirks included: every call sends only `Content-Type: application/json` (so every call,
// GET too, is CORS-preflighted); at 941c581 the chat POST carries only the newest user message while the history
// PUT carries the whole conversation; 941c581 reads a multi-agent stream one network read = one event and shows
// nothing until the stream closes (30 s timeout); HEAD posts the whole history (hidden error messages too) to the
// bare URLs and uses `data.messages` as it comes. Error messages are role 'system' and hidden, like the real page
// hides them; unlike it, this page also lists every error in the footer and in `window.__errors`.
//
// Test hooks: body[data-ready="1"] once the first history load is done, body[data-pending] counts operations
// still running (a send is running until its history PUT and list GET are done), window.__errors.

const REVISIONS = { documented: '941c581', current: 'eb435d2' };
const CHAT_TIMEOUT_MS = 30000; // 941c581 only

const params = new URLSearchParams(location.search);
const REV = params.get('rev');
const API = (params.get('api') ?? '').replace(/\/+$/, '');
const RESPONSE_MODE = params.get('responseMode') ?? 'stream';
const STD = `${API}/chat-ui/chat`;
const MA = `${API}/multi-agent-chat`;
const HIST = `${API}/chat-history`;
const JSON_HEADERS = { 'Content-Type': 'application/json' };

// ---------------------------------------------------------------------------------------------------------------
// Error record (the test fails on any entry)

window.__errors = [];

function recordError(source, message) {
  window.__errors.push({ source, message: String(message), at: new Date().toISOString() });
  renderDebug();
}

window.addEventListener('error', (e) => recordError('page', e.message));
window.addEventListener('unhandledrejection', (e) => recordError('page', e.reason?.stack ?? e.reason));

// ---------------------------------------------------------------------------------------------------------------
// Helpers

const $ = (sel) => document.querySelector(sel);

function uuidv4() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// Both revisions stamp messages with the browser's local wall-clock time, e.g. "09:05 AM" in en-US.
const formatTimestamp = () => new Date().toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

class NamedError extends Error {
  constructor(name, message) {
    super(message);
    this.name = name;
  }
}
const chatApiError = (message) => new NamedError('ChatApiError', message);

// Operations in flight, for the test: a counter on <body>.
async function tracked(fn) {
  const body = document.body;
  body.dataset.pending = String(Number(body.dataset.pending) + 1);
  try {
    return await fn();
  } finally {
    body.dataset.pending = String(Number(body.dataset.pending) - 1);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// History API (the same at both revisions)

// A chat of the history's list (or the one it created), as the Chat UI keeps it.
const chatOf = (item, mode) => ({
  id: item.id,
  title: item.title,
  lastMessage: item.lastMessage || '',
  lastUpdated: new Date(item.lastUpdated),
  messageCount: item.messageCount || 0,
  mode,
});

const historyApi = {
  async list(mode) {
    const res = await fetch(`${HIST}?mode=${mode}`, { method: 'GET', headers: JSON_HEADERS });
    if (!res.ok) throw new Error(`Failed to get chat histories: ${res.status}`);
    const data = await res.json();
    return data.map((item) => chatOf(item, mode));
  },

  async messages(chatId) {
    const res = await fetch(`${HIST}/${chatId}/messages`, { method: 'GET', headers: JSON_HEADERS });
    if (!res.ok) throw new Error(`Failed to get chat messages: ${res.status}`);
    const data = await res.json();
    // Only agentIdentifier is read back (not agentName), at both revisions.
    return data.map((item) => ({
      id: item.id || uuidv4(),
      content: item.content,
      role: item.role,
      timestamp: item.timestamp,
      agentIdentifier: item.agentIdentifier,
    }));
  },

  async create(mode) {
    const res = await fetch(HIST, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: JSON.stringify({ mode, title: 'New Chat' }),
    });
    if (!res.ok) throw new Error(`Failed to create chat: ${res.status}`);
    return chatOf(await res.json(), mode);
  },

  async update(chatId, messages) {
    const res = await fetch(`${HIST}/${chatId}`, {
      method: 'PUT',
      headers: JSON_HEADERS,
      body: JSON.stringify({ messages }),
    });
    if (!res.ok) throw new Error(`Failed to update chat: ${res.status}`);
    return res.json();
  },
};

// ---------------------------------------------------------------------------------------------------------------
// Chat API, 941c581 ("documented")

// ChatMessageContent (the spec's shape): the TextContent items' texts, joined by newlines.
const textOf = (item) =>
  item.Items.filter((i) => i.$type === 'TextContent')
    .map((i) => i.Text)
    .join('\n');

async function failFor(res) {
  const detail = await res.text().catch(() => 'No error details available');
  switch (res.status) {
    case 400: return chatApiError(`Bad request: ${detail}`);
    case 401: return chatApiError('Authentication failed. Please sign in again.');
    case 403: return chatApiError('You do not have permission to access this resource.');
    case 404: return chatApiError('The requested resource was not found.');
    case 429: return chatApiError('Too many requests. Please try again later.');
    case 500: case 502: case 503: case 504:
      return chatApiError(`The server encountered an error. Please try again later. (${res.status} ${detail})`);
    default: return chatApiError(`API call failed with status: ${res.status}`);
  }
}

async function documentedStandard(payload, signal) {
  try {
    const res = await fetch(STD, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(payload), signal });
    if (!res.ok) throw await failFor(res);
    const data = await res.json().catch(() => {
      throw chatApiError('Failed to parse API response. Please try again.');
    });
    if (!Array.isArray(data) || data.length === 0) {
      return { id: uuidv4(), content: 'Received response in an unexpected format.', role: 'assistant', timestamp: formatTimestamp() };
    }
    const first = data[0]; // later elements are ignored; Items and Metadata must be there
    return { id: first.Metadata.Id || uuidv4(), content: textOf(first), role: 'assistant', timestamp: formatTimestamp() };
  } catch (error) {
    if (error.name === 'ChatApiError' || error.name === 'AbortError') throw error;
    throw chatApiError(`Failed to process standard chat request. (${error.message})`);
  }
}

// One network read is taken as exactly one SSE event: no buffering across reads, so two events in one read, or
// one event split over two reads, are lost (the real page logs them with console.error; here they are errors).
// Nothing is shown until the stream has closed.
async function documentedStream(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const messages = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (signal.aborted) throw new Error('Stream processing was aborted');
      const chunk = decoder.decode(value, { stream: true });
      if (!chunk.trim().startsWith('data:')) {
        if (chunk.trim()) recordError('stream-read', `read ignored (no "data:" at its start): ${JSON.stringify(chunk)}`);
        continue;
      }
      try {
        const dataString = chunk.replace(/^data: /, '').trim();
        if (dataString === '[HEARTBEAT]') continue;
        const event = JSON.parse(dataString);
        const content = textOf(event);
        if (content.trim()) {
          messages.push({ id: event.Metadata.Id || uuidv4(), content, role: 'assistant', agentName: event.AuthorName, timestamp: formatTimestamp() });
        }
      } catch (error) {
        recordError('stream-read', `read dropped (${error.message}): ${JSON.stringify(chunk)}`);
      }
    }
    return messages;
  } catch (error) {
    if (signal.aborted) throw new Error('Stream processing was aborted');
    recordError('stream', error.message);
    if (messages.length > 0) return messages;
    throw chatApiError('Error processing streaming response.');
  } finally {
    reader.releaseLock();
  }
}

function documentedBatch(data) {
  if (!Array.isArray(data)) {
    return [{ id: uuidv4(), content: 'Received response in an unexpected format.', role: 'assistant', timestamp: formatTimestamp() }];
  }
  try {
    // Every element is an assistant bubble (Role is not read); Metadata is required on each.
    return data.map((item) => ({
      id: item.Metadata.Id || uuidv4(),
      content: textOf(item),
      role: 'assistant',
      agentName: item.AuthorName,
      timestamp: formatTimestamp(),
    }));
  } catch (error) {
    throw chatApiError(`Failed to process multi-agent response data. (${error.message})`);
  }
}

async function documentedMultiAgent(payload, signal) {
  try {
    const stream = RESPONSE_MODE === 'stream';
    const headers = stream ? { ...JSON_HEADERS, Accept: 'text/event-stream' } : { ...JSON_HEADERS };
    const res = await fetch(`${MA}${stream ? '/stream' : '/batch'}`, { method: 'POST', headers, body: JSON.stringify(payload), signal });
    if (!res.ok) throw await failFor(res);
    if (stream && res.body) return await documentedStream(res.body, signal);
    const data = await res.json().catch(() => {
      throw chatApiError('Failed to parse API response. Please try again.');
    });
    return documentedBatch(data);
  } catch (error) {
    if (error.name === 'ChatApiError' || error.name === 'AbortError') throw error;
    throw chatApiError(`Failed to process multi-agent chat request. (${error.message})`);
  }
}

async function documentedSend(messages, agentMode) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), CHAT_TIMEOUT_MS);
  const payload = { messages: messages.map((m) => ({ role: m.role, content: m.content })) };
  try {
    return agentMode === 'standard'
      ? await documentedStandard(payload, controller.signal)
      : await documentedMultiAgent(payload, controller.signal);
  } catch (error) {
    if (error.name === 'AbortError') throw new NamedError('TimeoutError', 'The request timed out. Please try again.');
    if (error.name === 'ChatApiError') throw error;
    if (/network|fetch/i.test(error.message)) {
      throw new NamedError('NetworkError', `Network error. Please check your connection and try again. (${error.message})`);
    }
    throw new Error(`An unexpected error occurred. Please try again later. (${error.message})`);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Chat API, eb435d2 ("current"): the bare URL for each mode, no Accept, no timeout, `data.messages` used raw.

async function currentSend(messages, agentMode) {
  const endpoint = agentMode === 'standard' ? STD : MA;
  try {
    const res = await fetch(endpoint, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: JSON.stringify({ messages: messages.map((m) => ({ role: m.role, content: m.content })) }),
    });
    if (!res.ok) {
      const body = await res.json().catch(() => ({ message: 'Failed to parse error response' }));
      throw chatApiError(body.message || `HTTP error! status: ${res.status}`);
    }
    const data = await res.json();
    return data.messages;
  } catch (error) {
    if (error.name === 'ChatApiError') throw error;
    throw new Error(`Network error or unexpected issue occurred. (${error.message})`);
  }
}

const chatApi = { send: REV === 'current' ? currentSend : documentedSend };

// ---------------------------------------------------------------------------------------------------------------
// State (what the real page's ChatContext holds) and its actions

const state = { agentMode: 'standard', messages: [], histories: [], activeChatId: null, isLoading: false };

function setState(patch) {
  Object.assign(state, patch);
  render();
}

const chatModeOf = (agentMode) => (agentMode === 'standard' ? 'standard' : 'multiAgent');

// At load and on each mode change: list the mode's chats and open the first (the server's most recent).
async function loadHistories() {
  try {
    const histories = await historyApi.list(chatModeOf(state.agentMode));
    setState({ histories, activeChatId: null, messages: [] });
    if (histories.length > 0) await selectChat(histories[0].id);
  } catch (error) {
    recordError('history', `Failed to load chat histories: ${error.message}`);
  }
}

async function selectChat(chatId) {
  if (state.activeChatId === chatId) return;
  try {
    const messages = await historyApi.messages(chatId);
    setState({ activeChatId: chatId, messages });
  } catch (error) {
    recordError('history', `Failed to select chat: ${error.message}`);
  }
}

function setAgentMode(mode) {
  const changed = mode !== state.agentMode;
  setState({ agentMode: mode, activeChatId: null, messages: [], histories: [] });
  if (changed) tracked(loadHistories); // the real page reloads only when the mode changed
}

function clearMessages() {
  setState({ messages: [], activeChatId: null });
}

function errorText(error) {
  if (error.name === 'ChatApiError') return `API Error: ${error.message}`;
  if (error.name === 'NetworkError' || error.name === 'TimeoutError') return error.message;
  return `Error: ${error.message}`;
}

async function sendMessage(content) {
  const agentMode = state.agentMode;
  let chatId = state.activeChatId;
  if (!chatId) {
    try {
      const chat = await historyApi.create(chatModeOf(agentMode));
      chatId = chat.id;
      setState({ histories: [chat, ...state.histories.filter((h) => h.id !== chat.id)], activeChatId: chatId, messages: [] });
    } catch (error) {
      const message = `Error creating chat: ${error.message}`;
      recordError('chat', message);
      setState({ messages: [{ id: uuidv4(), content: message, role: 'system', timestamp: formatTimestamp() }], isLoading: false });
      return;
    }
  }

  const userMessage = { id: uuidv4(), content, role: 'user', timestamp: formatTimestamp() };
  const withUser = [...state.messages, userMessage];
  setState({ messages: withUser, isLoading: true });

  // 941c581's React state bug: the chat POST carries only the newest user message (the display and the history
  // PUT still have everything). HEAD sends every message in state, hidden system (error) messages included.
  const forApi = REV === 'current' ? withUser : [userMessage];
  try {
    const reply = await chatApi.send(forApi, agentMode);
    const replies = Array.isArray(reply) ? reply : [reply];
    const all = [...withUser, ...replies];
    setState({ messages: all, isLoading: false });
    await historyApi.update(chatId, all);
    const histories = await historyApi.list(chatModeOf(agentMode));
    setState({ histories });
  } catch (error) {
    const message = errorText(error);
    recordError('chat', message);
    const errorMessage = { id: uuidv4(), content: message, role: 'system', timestamp: formatTimestamp() };
    const messages = REV === 'current'
      ? [...withUser, errorMessage]
      : [...state.messages.filter((m) => m.id !== userMessage.id), userMessage, errorMessage];
    setState({ messages, isLoading: false });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Rendering

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Which messages the page shows: user and assistant only (system and tool are hidden; at HEAD an assistant
// message that carries a tool call is hidden too while tool messages are not shown, the default).
function visible(message) {
  if (message.role === 'user') return true;
  if (message.role !== 'assistant') return false;
  return !(REV === 'current' && message.toolCall);
}

function agentLabel(message) {
  if (message.role === 'user') return '';
  const agent = message.agentName || message.agentIdentifier;
  return REV === 'current' ? agent || '' : agent || 'Assistant';
}

function renderMessage(message) {
  const node = el('div', `msg ${message.role}`);
  node.dataset.role = message.role;
  node.dataset.id = message.id;
  const label = agentLabel(message);
  if (label) {
    node.dataset.agent = label;
    node.append(el('div', 'agent-label', label));
  }
  const bubble = el('div', 'bubble');
  // HEAD renders content as Markdown; plain text is enough for these tests.
  bubble.append(el('div', 'content', message.content));
  if (message.timestamp) bubble.append(el('div', 'timestamp', message.timestamp));
  node.append(bubble);
  return node;
}

const formatUpdated = (date) =>
  date.toLocaleDateString('en-US', { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

function renderHistories() {
  const list = $('#chat-list');
  list.replaceChildren(
    ...state.histories.map((chat) => {
      const item = el('li');
      const button = el('button', `chat-item${chat.id === state.activeChatId ? ' selected' : ''}`);
      button.type = 'button';
      button.dataset.id = chat.id;
      button.append(
        el('span', 'chat-title', chat.title),
        el('span', 'chat-last', chat.lastMessage || `${chat.messageCount} messages`),
        el('span', 'chat-updated', formatUpdated(chat.lastUpdated)),
      );
      button.addEventListener('click', () => tracked(() => selectChat(chat.id)));
      item.append(button);
      return item;
    }),
  );
  $('#history-empty').hidden = state.histories.length > 0;
}

function render() {
  const shown = state.messages.filter(visible); // a non-object here throws, as it crashes the real page
  $('#messages').replaceChildren(...(shown.length ? shown.map(renderMessage) : [emptyNode]));
  const box = $('#messages');
  box.scrollTop = box.scrollHeight;

  const multi = state.agentMode === 'multiAgent';
  document.querySelectorAll('.mode').forEach((b) => b.classList.toggle('active', b.dataset.mode === state.agentMode));
  $('#mode-caption').textContent = multi ? 'Using multi-agent mode' : 'Using standard chat mode';
  $('#loading').hidden = !state.isLoading;
  $('#loading-text').textContent = multi ? 'Agents are thinking...' : 'Processing your request...';
  const input = $('#input');
  input.disabled = state.isLoading;
  input.placeholder = state.isLoading ? 'Waiting for response...' : 'Type your message...';
  $('#send').disabled = state.isLoading || !input.value.trim();
  renderHistories();
}

function renderDebug() {
  const count = window.__errors.length;
  const summary = $('#debug-errors');
  if (!summary) return;
  summary.textContent = count ? `${count} error${count > 1 ? 's' : ''}` : 'no errors';
  summary.className = count ? 'bad' : 'ok';
  $('#error-list').replaceChildren(...window.__errors.map((e) => el('li', '', `[${e.source}] ${e.message}`)));
}

const emptyNode = $('#empty');

// ---------------------------------------------------------------------------------------------------------------
// Wiring

function submit() {
  const input = $('#input');
  const text = input.value;
  if (!text.trim() || state.isLoading) return;
  input.value = '';
  tracked(() => sendMessage(text));
}

function start() {
  const revLabel = REVISIONS[REV];
  const multi = REV === 'documented' ? ` · multi-agent ${RESPONSE_MODE === 'stream' ? 'stream' : 'batch'}` : '';
  $('#debug-config').textContent = `ChatUI ${REV} (${revLabel ?? '?'})${multi} · API ${API || '(none)'}`;
  renderDebug();

  if (!revLabel) recordError('config', `unknown rev ${JSON.stringify(REV)}: use documented or current`);
  if (!API) recordError('config', 'missing api= (the backend base URL)');
  if (!revLabel || !API) return;

  $('#composer').addEventListener('submit', (e) => {
    e.preventDefault();
    submit();
  });
  $('#input').addEventListener('input', () => {
    $('#send').disabled = state.isLoading || !$('#input').value.trim();
  });
  $('#input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  });
  document.querySelectorAll('.mode').forEach((b) => b.addEventListener('click', () => setAgentMode(b.dataset.mode)));
  $('#new-chat').addEventListener('click', clearMessages);

  render();
  tracked(loadHistories).finally(() => {
    document.body.dataset.ready = '1';
  });
}

start();
