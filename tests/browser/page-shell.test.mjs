// The page's app shell as a person meets it after some use: 100 chats, 20 API keys and 50 documents made first
// through the backend's own routes, then, at 1366×860 and on a phone (390×844): the window never scrolls (the
// conversation and the sidebar scroll each on its own), the sidebar's sections are tabs (the one chosen remembered)
// and the chats list pages as it scrolls; on a phone the sidebar is a drawer that its button names; after Enter the
// question and the streaming answer are inside the viewport (their bounding boxes checked) with the composer, in a
// chat long enough to scroll, and the log stays where the person scrolled up to while the answer streams; the page
// declares its icon, which loads under the page's policy (so no browser asks for a /favicon.ico); no failed request,
// no answer of 400 or more and no console error.
//
//   CHAT_BASE_URL=http://127.0.0.1:9050 [PAGE_SCREENSHOT_DIR=docs/screenshots] node --test tests/browser/page-shell.test.mjs
//
// against the page suite's local run (tests/suites.py, section "page": retrieval on, no sign-in, the local model
// pacing its words), after tests/browser/page.test.mjs (which makes a key of its own: a person holds 20 at most). The
// keys and documents it made are removed at the end. With PAGE_SCREENSHOT_DIR it saves page-shell-wide.png,
// page-shell-dark.png and page-shell-phone.png (the phone's drawer open: page-shell-drawer.png) there.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { launchChromium } from './chromium.mjs';
import { STEP_TIMEOUT_MS, assertQuiet, ask, showTab, turnDone, watch } from './page-steps.mjs';

const BASE = (process.env.CHAT_BASE_URL ?? 'http://127.0.0.1:9050').replace(/\/+$/, '');
const SHOTS = process.env.PAGE_SCREENSHOT_DIR;
const CHATS = 100;
const KEYS = 20; // MAX_KEYS_PER_OWNER: the most one person may hold
const DOCUMENTS = 50;
const PER_UPLOAD = 10; // MAX_DOCUMENTS_PER_UPLOAD's default
const TEST_TIMEOUT_MS = 240000;
const WIDE = { width: 1366, height: 860 };
const PHONE = { width: 390, height: 844, deviceScaleFactor: 2, isMobile: true, hasTouch: true };
const T0 = Date.now();
const step = (what) => process.env.CHATUI_DEBUG && process.stderr.write(`[${((Date.now() - T0) / 1000).toFixed(1)}s] ${what}\n`);

async function call(method, route, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(`${BASE}${route}`, init);
  const text = await res.text();
  assert.ok(res.ok, `${method} ${route} answered ${res.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

// `count` calls of `make(i)`, `width` at a time.
async function inBatches(count, width, make) {
  const out = [];
  for (let i = 0; i < count; i += width) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(width, count - i) }, (_, j) => make(i + j)))));
  }
  return out;
}

// Where `selector`'s last match is, against the window: its box and whether all of it is inside the viewport.
function placed(page, selector) {
  return page.evaluate((sel) => {
    const all = document.querySelectorAll(sel);
    const node = all[all.length - 1];
    if (!node) return null;
    const r = node.getBoundingClientRect();
    return {
      top: Math.round(r.top), bottom: Math.round(r.bottom), left: Math.round(r.left), right: Math.round(r.right),
      inside: r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth,
      viewport: [innerWidth, innerHeight],
    };
  }, selector);
}

// The window itself never scrolls: the document is the window's height, and scrollY stays 0.
async function windowStill(page, when) {
  const w = await page.evaluate(() => ({ scrollY, height: document.documentElement.scrollHeight, inner: innerHeight }));
  assert.equal(w.scrollY, 0, `${when}: the window did not scroll (${JSON.stringify(w)})`);
  assert.ok(w.height <= w.inner + 1, `${when}: the document is the window's height (${JSON.stringify(w)})`);
}

const made = { keys: [], documents: [], longChat: null };
let browser;

describe(`the page's shell at ${BASE}/ after some use`, () => {
  before(async () => {
    step('making chats, keys and documents');
    const stamp = Date.now().toString(36);
    await inBatches(CHATS, 10, (i) => call('POST', '/chat-history', { mode: 'standard', title: `Seeded chat ${i + 1} (${stamp})` }));
    // One chat long enough to scroll, opened before asking: its end is far below its start.
    const long = await call('POST', '/chat-history', { mode: 'standard', title: `A long chat (${stamp})` });
    const messages = [];
    for (let i = 0; i < 15; i += 1) {
      messages.push({ role: 'user', content: `Question ${i + 1} of the long chat?` });
      messages.push({ role: 'assistant', content: `Answer ${i + 1}. ${'This answer fills some lines of the log. '.repeat(8)}` });
    }
    await call('PUT', `/chat-history/${long.id}`, { messages });
    made.longChat = long.id;
    const held = (await call('GET', '/api-keys')).filter((k) => !k.expired).length;
    made.keys = (await inBatches(KEYS - held, 5, (i) => call('POST', '/api-keys', { name: `shell key ${i + 1}` }))).map((k) => k.id);
    for (let i = 0; i < DOCUMENTS; i += PER_UPLOAD) {
      const form = new FormData();
      for (let j = i; j < Math.min(DOCUMENTS, i + PER_UPLOAD); j += 1) {
        form.append('files', new Blob([`# Note ${j + 1}\n\nSeeded note ${j + 1} of the shell test (${stamp}).\n`], { type: 'text/markdown' }), `Shell_note_${String(j + 1).padStart(2, '0')}_${stamp}.md`);
      }
      const answer = await call('POST', '/documents', form);
      const docs = Array.isArray(answer) ? answer : answer.documents ?? [answer];
      made.documents.push(...docs.map((d) => d.id));
    }
    assert.equal(made.documents.length, DOCUMENTS, 'every document was taken');
    step(`made ${CHATS + 1} chats, ${made.keys.length} keys (20 held), ${made.documents.length} documents`);
    browser = await launchChromium(WIDE);
  });
  after(async () => {
    await browser?.close();
    await Promise.all(made.keys.map((id) => fetch(`${BASE}/api-keys/${id}`, { method: 'DELETE' })));
    await inBatches(made.documents.length, 10, (i) => fetch(`${BASE}/documents/${made.documents[i]}`, { method: 'DELETE' }));
  });

  for (const [name, viewport] of [['wide', WIDE], ['phone', PHONE]]) {
    test(`${name} (${viewport.width}×${viewport.height}): the window stays put, the question and the streaming answer in view`, { timeout: TEST_TIMEOUT_MS }, async () => {
      const page = await browser.newPage();
      page.setDefaultTimeout(STEP_TIMEOUT_MS);
      await page.setViewport(viewport);
      const seen = watch(page);
      await page.goto(`${BASE}/`, { waitUntil: 'load' });
      // Loaded: a page of chats, the keys and the documents.
      await page.waitForFunction(() => document.querySelectorAll('#history-list li[data-id]').length >= 50
        && document.querySelectorAll('#api-key-list li[data-id]').length >= 20
        && document.querySelectorAll('#doc-list li[data-id]').length >= 50);
      await windowStill(page, 'loaded');
      assert.ok((await placed(page, '#composer')).inside, 'the composer is in view on load');

      // The icon: declared, served, and an image the page's own policy lets it load (headless Chromium asks for no
      // icon by itself, so the page loads it here as a browser's tab would).
      const icon = await page.$eval('link[rel="icon"]', (l) => l.href);
      assert.equal(icon, `${BASE}/favicon.svg`);
      const served = await fetch(icon);
      assert.equal(served.status, 200);
      assert.equal(served.headers.get('content-type'), 'image/svg+xml');
      const drawn = await page.evaluate((href) => new Promise((resolve) => {
        const img = new Image();
        img.onload = () => resolve(img.naturalWidth > 0);
        img.onerror = () => resolve(false);
        img.src = href;
      }), icon);
      assert.ok(drawn, 'the icon loads as an image under the page\'s Content-Security-Policy');

      if (name === 'phone') {
        // The drawer: closed, its button names what it holds; it opens over the conversation, and Escape closes it.
        assert.equal(await page.$eval('#side', (s) => getComputedStyle(s).display), 'none', 'the drawer starts closed');
        const label = await page.$eval('#nav-toggle', (b) => b.textContent);
        assert.equal(label, 'Chats · Usage · API keys · Documents');
        assert.equal(await page.$eval('#side', (s) => s.getAttribute('aria-label')), 'Chats, usage, API keys and documents');
        await page.click('#nav-toggle');
        await page.waitForSelector('#side.open', { visible: true });
        assert.equal(await page.$eval('#nav-toggle', (b) => b.getAttribute('aria-expanded')), 'true');
        const drawer = await placed(page, '#side');
        assert.ok(drawer.inside, `the drawer is inside the viewport: ${JSON.stringify(drawer)}`);
        await showTab(page, 'documents');
        assert.ok((await placed(page, '#doc-drop')).inside, 'the documents are reached without scrolling past the chats');
        if (SHOTS) {
          fs.mkdirSync(SHOTS, { recursive: true });
          await page.screenshot({ path: path.join(SHOTS, 'page-shell-drawer.png') });
        }
        await showTab(page, 'chats');
        await page.keyboard.press('Escape');
        await page.waitForSelector('#side', { hidden: true });
        assert.equal(await page.evaluate(() => document.activeElement.id), 'nav-toggle', 'the focus is back on the button');
        // A tap on the conversation beside the drawer closes it too.
        await page.click('#nav-toggle');
        await page.waitForSelector('#side.open', { visible: true });
        await page.mouse.click(viewport.width - 10, 400);
        await page.waitForSelector('#side', { hidden: true });
        assert.equal(await page.$eval('#nav-toggle', (b) => b.getAttribute('aria-expanded')), 'false');
      } else {
        // The sections are tabs: each reached without scrolling past the chats, and the one chosen is remembered.
        const tabs = await page.$$eval('#side [role="tab"]:not([hidden])', (t) => t.map((x) => x.textContent));
        assert.deepEqual(tabs, ['Chats', 'Usage', 'API keys', 'Documents']);
        for (const [tab, inside] of [['usage', '#usage-refresh'], ['api-keys', '#api-key-create'], ['documents', '#doc-drop']]) {
          await showTab(page, tab);
          const box = await placed(page, inside);
          assert.ok(box.inside, `${tab}: ${inside} is in view without scrolling: ${JSON.stringify(box)}`);
        }
        // The documents panel scrolls on its own: its last document is reached by scrolling the panel, not the window.
        await page.$eval('#documents', (p) => { p.scrollTop = p.scrollHeight; });
        assert.ok((await placed(page, '#doc-list li')).inside, 'the last document is scrolled into view in its panel');
        await windowStill(page, 'after scrolling the documents');
        await page.reload({ waitUntil: 'load' });
        await page.waitForSelector('#documents.active', { visible: true });
        assert.equal(await page.$eval('#tab-documents', (t) => t.getAttribute('aria-selected')), 'true', 'the chosen tab is remembered');
        await showTab(page, 'chats');
        // The chats list pages as it scrolls: scrolled to its end, the next page comes.
        await page.waitForFunction(() => document.querySelectorAll('#history-list li[data-id]').length >= 50);
        const first = await page.$$eval('#history-list li[data-id]', (l) => l.length);
        await page.$eval('#chats', (p) => { p.scrollTop = p.scrollHeight; });
        await page.waitForFunction((n) => document.querySelectorAll('#history-list li[data-id]').length > n, {}, first);
        await page.$eval('#chats', (p) => { p.scrollTop = p.scrollHeight; });
        await page.waitForFunction((n) => document.querySelectorAll('#history-list li[data-id]').length >= n, {}, CHATS + 1);
        const ids = await page.$$eval('#history-list li[data-id]', (l) => l.map((x) => x.dataset.id));
        assert.equal(new Set(ids).size, ids.length, 'no chat is listed twice');
        await windowStill(page, 'after scrolling the chats');
      }

      // A chat long enough to scroll, then a question: the question, the answer as it streams and the composer are
      // inside the viewport.
      if (name === 'phone') {
        await page.click('#nav-toggle');
        await page.waitForSelector('#side.open', { visible: true });
      }
      await page.$eval('#chats', (p) => { p.scrollTop = 0; });
      await page.click(`#history-list li[data-id="${made.longChat}"] .open`);
      await page.waitForFunction(() => document.querySelectorAll('#log .msg').length >= 30);
      assert.ok(await page.$eval('#log', (l) => l.scrollHeight > l.clientHeight * 2), 'the chat is longer than the log');
      const question = `Where is the parental leave policy written down? (${name})`;
      await ask(page, question);
      await page.waitForFunction((q) => [...document.querySelectorAll('#log .msg.user')].at(-1)?.innerText.includes(q), {}, question);
      await page.waitForFunction(() => [...document.querySelectorAll('#log article.msg.assistant .body')].at(-1)?.textContent.length > 0);
      const streaming = await page.$eval('#log', (l) => l.getAttribute('aria-busy'));
      const during = {
        question: await placed(page, '#log .msg.user'),
        answer: await placed(page, '#log article.msg.assistant'),
        composer: await placed(page, '#composer'),
      };
      step(`${name}, while the answer streams (aria-busy ${streaming}): ${JSON.stringify(during)}`);
      for (const [what, box] of Object.entries(during)) assert.ok(box.inside, `${what} in view after Enter: ${JSON.stringify(box)}`);
      await windowStill(page, 'after Enter');
      if (SHOTS && name === 'wide') {
        fs.mkdirSync(SHOTS, { recursive: true });
        await page.screenshot({ path: path.join(SHOTS, 'page-shell-wide.png') });
      }
      await turnDone(page);
      const done = {
        question: await placed(page, '#log .msg.user'),
        answer: await placed(page, '#log article.msg.assistant'),
        composer: await placed(page, '#composer'),
      };
      // The answer may be taller than the log: then its end is in view, and the question just above it.
      assert.ok(done.composer.inside, `the composer in view when the answer is done: ${JSON.stringify(done.composer)}`);
      const logBox = await placed(page, '#log');
      assert.ok(done.answer.bottom <= logBox.bottom + 1 && done.answer.bottom > logBox.top, `the answer's end is in view: ${JSON.stringify({ done, logBox })}`);
      assert.ok(done.question.bottom > 0 || done.answer.top < 0, `the question is in view, or the answer fills the log: ${JSON.stringify(done)}`);
      await windowStill(page, 'when the answer is done');

      if (name === 'wide') {
        // Scrolled up to read while an answer streams: the log stays where the person put it.
        await ask(page, 'Tell me everything about the benefit options, please');
        await page.waitForFunction(() => [...document.querySelectorAll('#log article.msg.assistant .body')].at(-1)?.textContent.length > 0);
        await page.$eval('#log', (l) => { l.scrollTop = 100; l.dispatchEvent(new Event('scroll')); });
        const grownFrom = await page.$eval('#log', (l) => l.scrollHeight);
        await page.waitForFunction((h) => document.getElementById('log').scrollHeight > h
          || document.getElementById('log').getAttribute('aria-busy') === 'false', {}, grownFrom);
        await turnDone(page);
        const top = await page.$eval('#log', (l) => l.scrollTop);
        assert.ok(Math.abs(top - 100) <= 2, `the log stayed where it was scrolled to (scrollTop ${top})`);
        if (SHOTS) {
          await page.$eval('#log', (l) => { l.scrollTop = l.scrollHeight; });
          await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
          await page.screenshot({ path: path.join(SHOTS, 'page-shell-dark.png') });
          await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
        }
      } else if (SHOTS) {
        fs.mkdirSync(SHOTS, { recursive: true });
        await page.screenshot({ path: path.join(SHOTS, 'page-shell-phone.png') });
      }

      assert.ok(!seen.calls.includes('GET /favicon.ico'), `no /favicon.ico asked for: ${seen.calls}`); // a browser asks for it only when no icon is declared
      assertQuiet(seen);
      await page.close();
    });
  }
});
