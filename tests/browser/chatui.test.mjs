// The Chat UI in a real browser: headless Chromium (from npm: @sparticuz/chromium + puppeteer-core) drives
// page/, a stand-in for the ChatUI front end that makes its HTTP calls exactly as the real page does at one of
// two revisions, against a running backend, from another origin (so CORS applies as it would in production).
//
//   CHAT_BASE_URL=http://127.0.0.1:9000 CHATUI_REVISION=documented|current [SCREENSHOT_DIR=dir] node --test tests/browser/
//
// The backend must answer the revision's dialect: CHAT_UI_REPLY=spec for `documented` (941c581), =messages for
// `current` (eb435d2). Its local model answers `Echo: <last user message>`.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './chromium.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PAGE_DIR = path.join(HERE, 'page');
const BASE = (process.env.CHAT_BASE_URL ?? 'http://127.0.0.1:9000').replace(/\/+$/, '');
const REV = process.env.CHATUI_REVISION;
const SHOTS = process.env.SCREENSHOT_DIR;
const AGENTS = ['BusinessAnalyst', 'SoftwareEngineer', 'ProductOwner']; // the backend's default group
const MAX_AGENT_TURNS = 6; // the backend's default
const REPLY_TIMEOUT_MS = 35000; // above 941c581's own 30 s
const TEST_TIMEOUT_MS = 150000; // nothing waits for ever
// CHATUI_DEBUG=1: each step on stderr, with the time since the start.
const T0 = Date.now();
const step = (what) => process.env.CHATUI_DEBUG && process.stderr.write(`[${((Date.now() - T0) / 1000).toFixed(1)}s] ${what}\n`);
// The time the page shows, en-US: "09:05 AM" (Chromium launched with --lang=en-US uses an ASCII space).
const TIME_RE = /^\d{2}:\d{2} (AM|PM)$/;

if (REV !== 'documented' && REV !== 'current') {
  throw new Error(`set CHATUI_REVISION to documented (941c581, backend CHAT_UI_REPLY=spec) or current (eb435d2, CHAT_UI_REPLY=messages); got ${JSON.stringify(REV)}`);
}

// ---------------------------------------------------------------------------------------------------------------
// The page's own origin: a static server for page/

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
const pageServer = http.createServer((req, res) => {
  const name = new URL(req.url, 'http://x').pathname.replace(/^\/+/, '') || 'index.html';
  const file = path.join(PAGE_DIR, path.basename(name));
  if (!TYPES[path.extname(file)] || !fs.existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)], 'Cache-Control': 'no-store' });
  fs.createReadStream(file).pipe(res);
});

let browser;
let origin;

async function launch() {
  return launchChromium({ width: 1200, height: 760 });
}



// `cargo lambda watch` (the local run) builds a function when it is first called after a change, which can take
// longer than a reply may; call each function once, with time to spare, before timing the page. No side effects:
// the Chat UI routes store nothing for a request that names no chat.
async function warmUp() {
  const call = async (url, init = {}) => {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(180000) });
    await res.arrayBuffer(); // to its end: the local run's functions take one request at a time
    return res.status;
  };
  const post = (url, content, accept) =>
    call(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(accept ? { Accept: accept } : {}) },
      body: JSON.stringify({ messages: [{ role: 'user', content }] }),
    });
  // [[say:…]] makes the local model's agents answer in a word, so this round is short.
  const statuses = await Promise.all([
    call(`${BASE}/chat-history?mode=standard&limit=1`),
    post(`${BASE}/chat-ui/chat`, 'warm up'),
    post(`${BASE}/multi-agent-chat/stream`, '[[say:ready]]', 'text/event-stream'),
  ]);
  assert.deepEqual(statuses, [200, 200, 200], `the backend at ${BASE} answers`);
}

// ---------------------------------------------------------------------------------------------------------------
// A page and what it did on the network

// Each page in its own browser context: its own cache, so its own CORS preflights.
async function openPage(query = {}, { intercept } = {}) {
  const page = await (await browser.createBrowserContext()).newPage();
  page.setDefaultTimeout(REPLY_TIMEOUT_MS);
  if (intercept) {
    await page.setRequestInterception(true);
    page.on('request', intercept);
  }
  const seen = { pageErrors: [], calls: [], preflights: [], failed: [] };
  const isBackend = (url) => url.startsWith(`${BASE}/`);
  page.on('pageerror', (e) => seen.pageErrors.push(e.message));
  page.on('requestfailed', (r) => isBackend(r.url()) && seen.failed.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    const req = r.request();
    if (!isBackend(r.url())) return;
    const entry = { method: req.method(), url: r.url(), status: r.status(), headers: req.headers(), body: req.postData() };
    (req.method() === 'OPTIONS' ? seen.preflights : seen.calls).push(entry);
  });
  const params = new URLSearchParams({ rev: REV, api: BASE, ...query });
  step(`open page ?${params}`);
  await page.goto(`${origin}/index.html?${params}`, { waitUntil: 'load' });
  await idle(page);
  return { page, seen };
}

// Every operation the page started (history load, a send with its history PUT and list GET) has finished.
const idle = (page) =>
  page.waitForFunction(() => document.body.dataset.ready === '1' && document.body.dataset.pending === '0', { timeout: REPLY_TIMEOUT_MS });

const bubbles = (page) =>
  page.$$eval('#messages .msg', (nodes) =>
    nodes.map((n) => ({
      id: n.dataset.id,
      role: n.dataset.role,
      agent: n.querySelector('.agent-label')?.textContent ?? '',
      content: n.querySelector('.content')?.textContent ?? '',
      timestamp: n.querySelector('.timestamp')?.textContent ?? '',
    })),
  );

const pageErrors = (page) => page.evaluate(() => window.__errors);

async function send(page, text, { expectReply = true } = {}) {
  step(`send ${JSON.stringify(text)}`);
  const before = (await bubbles(page)).length;
  await page.type('textarea[placeholder="Type your message..."]', text);
  await page.click('button[aria-label="Send message"]');
  if (expectReply) {
    // The user's bubble, then (941c581 multi-agent: only once the stream has closed) the replies.
    await page
      .waitForFunction((n) => document.querySelectorAll('#messages .msg').length > n + 1, { timeout: REPLY_TIMEOUT_MS }, before)
      .catch(async (e) => {
        throw new Error(`no reply to ${JSON.stringify(text)}: ${e.message}; page errors ${JSON.stringify(await pageErrors(page))}`);
      });
  }
  await idle(page);
  return (await bubbles(page)).slice(before);
}

async function newConversation(page) {
  await page.click('button[aria-label="New Chat"]');
  assert.deepEqual(await bubbles(page), [], 'New Chat empties the conversation');
}

async function switchMode(page, label) {
  await page.click(`button[aria-label="${label}"]`);
  await idle(page);
}

const BROWSER_HEADERS = new Set(['host', 'connection', 'content-length', 'accept-encoding', 'accept-language', 'origin', 'referer', 'user-agent', 'accept', 'content-type']);

// No error recorded by the page, no script error, every backend call answered 2xx, every preflight too.
async function assertClean(page, seen, { allowErrors = 0 } = {}) {
  const errors = await pageErrors(page);
  assert.equal(errors.length, allowErrors, `errors recorded by the page: ${JSON.stringify(errors, null, 1)}`);
  assert.deepEqual(seen.pageErrors, [], 'script errors');
  assert.deepEqual(seen.failed, [], 'failed backend requests (a CORS refusal shows here)');
  const bad = [...seen.calls, ...seen.preflights].filter((c) => c.status < 200 || c.status > 299);
  assert.deepEqual(bad.map((c) => `${c.method} ${c.url} -> ${c.status}`), [], 'backend answers that are not 2xx');
  // Every call is preflighted (it sends Content-Type: application/json). The browser caches a preflight for the
  // answer's Access-Control-Max-Age, so a repeated call may go without; each page has its own browser context,
  // so every URL and method the page calls was preflighted at least once.
  for (const c of seen.calls) {
    const preflighted = seen.preflights.some((p) => p.url === c.url && p.headers['access-control-request-method'] === c.method);
    assert.ok(preflighted, `${c.method} ${c.url} was preflighted`);
    assert.deepEqual(Object.keys(c.headers).filter((h) => !BROWSER_HEADERS.has(h) && !h.startsWith('sec-')), [],
      `${c.method} ${c.url} sends no other headers`);
    assert.equal(c.headers['content-type'], 'application/json', `${c.method} ${c.url} Content-Type`);
  }
}

async function shot(page, name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `chatui-${REV}-${name}.png`) });
}

// ---------------------------------------------------------------------------------------------------------------
// The backend's history, read from node

async function getJson(url) {
  const res = await fetch(url, { signal: AbortSignal.timeout(20000) });
  assert.equal(res.status, 200, `GET ${url}`);
  return res.json();
}

// The chats of `mode` whose messages mention `token` (the newest 100 chats are searched).
async function chatsWith(mode, token) {
  step(`history: ${mode} chats with ${token}`);
  const chats = await getJson(`${BASE}/chat-history?mode=${mode}&limit=100`);
  const found = [];
  for (let i = 0; i < chats.length; i += 10) {
    const batch = chats.slice(i, i + 10);
    const lists = await Promise.all(batch.map((c) => getJson(`${BASE}/chat-history/${c.id}/messages`)));
    batch.forEach((chat, k) => lists[k].some((m) => m.content?.includes(token)) && found.push({ chat, messages: lists[k] }));
  }
  return found;
}

const token = () => `tok${crypto.randomBytes(4).toString('hex')}`;
const chatPosts = (seen, url) => seen.calls.filter((c) => c.method === 'POST' && c.url === url);

// ---------------------------------------------------------------------------------------------------------------

describe(`ChatUI ${REV} (${REV === 'documented' ? '941c581' : 'eb435d2'}) against ${BASE}`, () => {
  before(async () => {
    await new Promise((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${pageServer.address().port}`;
    assert.notEqual(new URL(origin).origin, new URL(BASE).origin, 'the page must be on another origin than the backend');
    browser = await launch();
    step('browser up; warming the backend up');
    await warmUp();
    step('backend warm');
  });
  after(async () => {
    step('closing the browser');
    await browser?.close();
    pageServer.closeAllConnections();
    pageServer.close();
  });

  test(`standard chat, ${REV}: three messages, each answered, stored as one chat`, { timeout: TEST_TIMEOUT_MS }, async () => {
    const { page, seen } = await openPage(REV === 'documented' ? { responseMode: 'stream' } : {});
    try {
      await newConversation(page);
      const tok = token();
      const texts = [`hello ${tok} one`, `tell me more ${tok} two`, `thanks ${tok} three`];
      for (const text of texts) {
        const got = await send(page, text);
        assert.equal(got.length, 2, `one user and one assistant bubble for ${text}: ${JSON.stringify(got)}`);
        assert.deepEqual([got[0].role, got[0].content], ['user', text]);
        assert.deepEqual([got[1].role, got[1].content], ['assistant', `Echo: ${text}`]);
        assert.match(got[1].timestamp, TIME_RE, 'the reply carries a time');
        assert.equal(got[1].agent, REV === 'documented' ? 'Assistant' : '', 'agent label');
      }
      await assertClean(page, seen);

      // What the page sent: 941c581 only the newest message, HEAD the whole conversation so far.
      const posts = chatPosts(seen, `${BASE}/chat-ui/chat`);
      assert.equal(posts.length, 3);
      posts.forEach((p, i) => {
        const sent = JSON.parse(p.body).messages;
        assert.equal(sent.length, REV === 'documented' ? 1 : 2 * i + 1);
        assert.deepEqual(sent.at(-1), { role: 'user', content: texts[i] });
      });
      const created = seen.calls.filter((c) => c.method === 'POST' && c.url === `${BASE}/chat-history`);
      assert.deepEqual(created.map((c) => JSON.parse(c.body)), [{ mode: 'standard', title: 'New Chat' }]);
      assert.equal(seen.calls.filter((c) => c.method === 'PUT').length, 3);

      // The sidebar lists the chat, selected.
      const activeId = await page.$eval('.chat-item.selected', (b) => b.dataset.id);
      const shown = await bubbles(page);
      await shot(page, 'standard');

      // The backend holds exactly one chat with the conversation: the page's PUTs, and nothing from the chat POSTs.
      const found = await chatsWith('standard', tok);
      assert.equal(found.length, 1, `chats mentioning ${tok}: ${JSON.stringify(found.map((f) => f.chat))}`);
      assert.equal(found[0].chat.id, activeId);
      const stored = found[0].messages;
      assert.deepEqual(stored.map((m) => [m.role, m.content]), texts.flatMap((t) => [['user', t], ['assistant', `Echo: ${t}`]]));
      assert.deepEqual(stored.map((m) => m.id), shown.map((b) => b.id), 'stored ids are the page\'s');
      assert.deepEqual(stored.map((m) => m.timestamp), shown.map((b) => b.timestamp), 'stored times are the page\'s');
    } finally {
      await page.browserContext().close();
    }
  });

  async function multiAgentRound(page, text) {
    const got = await send(page, text);
    assert.deepEqual([got[0].role, got[0].content], ['user', text]);
    return got.slice(1);
  }

  // The agents speak round robin, up to MAX_AGENT_TURNS messages.
  function assertAgentRound(replies, text) {
    assert.ok(replies.length >= 1 && replies.length <= MAX_AGENT_TURNS, `1..${MAX_AGENT_TURNS} agent messages: ${replies.length}`);
    replies.forEach((r, i) => {
      assert.equal(r.role, 'assistant');
      assert.equal(r.agent, AGENTS[i % AGENTS.length], `agent ${i + 1} of the round for ${text}`);
      assert.ok(r.content.trim().length > 0, 'agent message has text');
      assert.match(r.timestamp, TIME_RE, 'agent message carries a time');
    });
    assert.equal(replies[0].content, `Echo: ${text}`, 'the first agent answers the user');
  }

  test(`multi-agent chat, ${REV}${REV === 'documented' ? ' (stream)' : ''}: three rounds, stored as one chat, reloaded`, { timeout: TEST_TIMEOUT_MS }, async () => {
    const { page, seen } = await openPage(REV === 'documented' ? { responseMode: 'stream' } : {});
    try {
      await switchMode(page, 'Multi-agent chat mode');
      await newConversation(page);
      const tok = token();
      const texts = [`plan ${tok} alpha`, `refine ${tok} beta`, `ship ${tok} gamma`];
      for (const text of texts) {
        const replies = await multiAgentRound(page, text);
        // 941c581 reads one event per network read: an event merged with another, or split, would be lost (and
        // recorded as an error), so the full round proves the events arrived one per read.
        assertAgentRound(replies, text);
        assert.equal(replies.length, MAX_AGENT_TURNS,
          `a full round (no agent says the approval phrase); page errors: ${JSON.stringify(await pageErrors(page))}`);
      }
      await assertClean(page, seen);
      const url = REV === 'documented' ? `${BASE}/multi-agent-chat/stream` : `${BASE}/multi-agent-chat`;
      const posts = chatPosts(seen, url);
      assert.equal(posts.length, 3, `POSTs to ${url}`);
      if (REV === 'documented') posts.forEach((p) => assert.equal(p.headers.accept, 'text/event-stream'));
      assert.equal(seen.calls.filter((c) => c.method === 'POST' && c.url.includes('/multi-agent-chat') && c.url !== url).length, 0);

      const activeId = await page.$eval('.chat-item.selected', (b) => b.dataset.id);
      const shown = await bubbles(page);
      // The last round from its start: the user's message at the top.
      await page.$$eval('#messages .msg.user', (nodes) => nodes.at(-1).scrollIntoView({ block: 'start' }));
      await shot(page, 'multi-agent');

      const found = await chatsWith('multiAgent', tok);
      assert.equal(found.length, 1, `multiAgent chats mentioning ${tok}: ${JSON.stringify(found.map((f) => f.chat))}`);
      assert.equal(found[0].chat.id, activeId);
      const stored = found[0].messages;
      assert.deepEqual(stored.map((m) => [m.role, m.content]), shown.map((b) => [b.role, b.content]), 'stored as shown');
      stored.forEach((m, i) => {
        if (m.role === 'assistant') assert.equal(m.agentIdentifier, shown[i].agent, `message ${i} agentIdentifier`);
        else assert.equal(m.agentIdentifier, undefined, `message ${i} (user) has no agentIdentifier`);
      });

      // Reload: switching to multi-agent opens the most recent multiAgent chat, labelled from agentIdentifier.
      await page.reload({ waitUntil: 'load' });
      await idle(page);
      await switchMode(page, 'Multi-agent chat mode');
      assert.equal(await page.$eval('.chat-item.selected', (b) => b.dataset.id), activeId, 'the chat is opened again');
      const reloaded = await bubbles(page);
      assert.deepEqual(reloaded.map((b) => [b.role, b.agent, b.content]), shown.map((b) => [b.role, b.agent, b.content]));
      await assertClean(page, seen);
    } finally {
      await page.browserContext().close();
    }
  });

  test(`multi-agent chat, documented (batch): one round`, { skip: REV !== 'documented' && 'only 941c581 has a batch mode', timeout: TEST_TIMEOUT_MS }, async (t) => {
    const { page, seen } = await openPage({ responseMode: 'batch' });
    try {
      await switchMode(page, 'Multi-agent chat mode');
      await newConversation(page);
      const text = `batch ${token()} delta`;
      let replies = await multiAgentRound(page, text);
      // 941c581 shows every element of the batch array as an assistant bubble; the array the docs describe
      // starts with the user's message echoed, which then shows as an unlabelled ("Assistant") reply.
      if (replies[0]?.agent === 'Assistant' && replies[0].content === text) {
        t.diagnostic('the batch answer echoes the user message; 941c581 shows it as an "Assistant" bubble');
        replies = replies.slice(1);
      }
      assertAgentRound(replies, text);
      assert.equal(replies.length, MAX_AGENT_TURNS);
      await assertClean(page, seen);
      const posts = chatPosts(seen, `${BASE}/multi-agent-chat/batch`);
      assert.equal(posts.length, 1);
      assert.notEqual(posts[0].headers.accept, 'text/event-stream', 'batch asks for no stream');
    } finally {
      await page.browserContext().close();
    }
  });

  test(`standard chat, ${REV}: a message the model refuses is an error the page can read`, { timeout: TEST_TIMEOUT_MS }, async () => {
    const { page, seen } = await openPage();
    try {
      await newConversation(page);
      const failing = `[[fault:validation]] ${token()}`;
      const got = await send(page, failing, { expectReply: false });
      assert.deepEqual(got.map((b) => [b.role, b.content]), [['user', failing]], 'no reply bubble, the error is hidden');
      const errors = await pageErrors(page);
      assert.equal(errors.length, 1, JSON.stringify(errors));
      // An "API Error" (not a network error): the error response carried its CORS headers, so the page read it.
      assert.match(errors[0].message, /^API Error: /);
      const refused = chatPosts(seen, `${BASE}/chat-ui/chat`);
      assert.equal(refused.length, 1);
      assert.ok(refused[0].status >= 400, `refused with an error status: ${refused[0].status}`);
      assert.equal(seen.calls.filter((c) => c.method === 'PUT').length, 0, 'nothing saved after an error');
      await assertClean(page, { ...seen, calls: seen.calls.filter((c) => c !== refused[0]) }, { allowErrors: 1 });
    } finally {
      await page.browserContext().close();
    }
  });

  test(`standard chat, ${REV}: after a failed send (hidden error message), the conversation goes on`, { timeout: TEST_TIMEOUT_MS }, async () => {
    // The first chat POST fails on the network; the page keeps a hidden system message, which HEAD sends along
    // with every later chat POST, and both revisions save in the history PUT.
    let dropped = 0;
    const intercept = (req) =>
      req.method() === 'POST' && req.url() === `${BASE}/chat-ui/chat` && dropped++ === 0 ? req.abort('failed') : req.continue();
    const { page, seen } = await openPage({}, { intercept });
    try {
      await newConversation(page);
      const tok = token();
      const first = `first ${tok} lost`;
      assert.deepEqual((await send(page, first, { expectReply: false })).map((b) => b.role), ['user']);
      const errors = await pageErrors(page);
      assert.equal(errors.length, 1, JSON.stringify(errors));

      const next = `and ${tok} again`;
      const reply = await send(page, next);
      // The local model echoes the last user turn: at HEAD the backend joins the two user messages into one turn.
      const echo = REV === 'current' ? `Echo: ${first} ${next}` : `Echo: ${next}`;
      assert.deepEqual(reply.map((b) => [b.role, b.content]), [['user', next], ['assistant', echo]]);
      const sent = JSON.parse(chatPosts(seen, `${BASE}/chat-ui/chat`).at(-1).body).messages;
      assert.deepEqual(sent.map((m) => m.role), REV === 'current' ? ['user', 'system', 'user'] : ['user']);
      const put = seen.calls.filter((c) => c.method === 'PUT');
      assert.equal(put.length, 1);
      assert.deepEqual(JSON.parse(put[0].body).messages.map((m) => m.role), ['user', 'system', 'user', 'assistant']);
      await assertClean(page, { ...seen, failed: seen.failed.filter((f) => !f.startsWith(`POST ${BASE}/chat-ui/chat`)) }, { allowErrors: 1 });
      assert.equal(seen.failed.length, 1, 'only the dropped request failed');

      // The backend took the save and left the page's note out of the conversation.
      const found = await chatsWith('standard', tok);
      assert.equal(found.length, 1);
      assert.deepEqual(found[0].messages.map((m) => [m.role, m.content]), [['user', first], ['user', next], ['assistant', echo]]);
    } finally {
      await page.browserContext().close();
    }
  });
});
