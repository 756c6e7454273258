// The backend's own page (web/index.html, served at `/`) in headless Chromium, as a person uses it: asks a question
// the sample knowledge base answers and sees the answer stream in with a `[Parental_Leave.md]` citation that opens
// its passage, opens the thoughts, reads the usage, finds the chat in history and renames, opens and deletes it,
// sends a file with a question, stops an answer, switches to multi-agent mode and sees each agent's message; makes an
// API key (shown once, copied), sees it listed, uses it and revokes it; uploads a document in the Documents panel
// (file picker, then a drop), sees its status pushed to `indexed`, asks about it and sees it cited, deletes it and
// asks again without it; with no failed request (but the stopped one), no answer of 400 or more and no console
// error on the way.
//
//   CHAT_BASE_URL=http://127.0.0.1:9050 [PAGE_SCREENSHOT_DIR=docs/screenshots] node --test tests/browser/page.test.mjs
//
// against a local run with retrieval on (the local knowledge base over samples/knowledge-base), no sign-in
// (AUTH_MODE=none) and the local model pacing its words (LOCAL_MODEL_PACE_MS=30): tests/suites.py, section "page".
// With PAGE_SCREENSHOT_DIR it saves page-light.png, page-dark.png, page-phone.png and page-documents.png there.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './chromium.mjs';
import { STEP_TIMEOUT_MS, assertQuiet, ask, showTab, turnDone, watchedPage } from './page-steps.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BASE = (process.env.CHAT_BASE_URL ?? 'http://127.0.0.1:9050').replace(/\/+$/, '');
const SHOTS = process.env.PAGE_SCREENSHOT_DIR;
const QUESTION = 'How many weeks of parental leave do employees get?';
const AGENTS = ['BusinessAnalyst', 'SoftwareEngineer', 'ProductOwner']; // the backend's default group
const TEST_TIMEOUT_MS = 240000;
const T0 = Date.now();
const step = (what) => process.env.CHATUI_DEBUG && process.stderr.write(`[${((Date.now() - T0) / 1000).toFixed(1)}s] ${what}\n`);

async function launch() {
  return launchChromium({ width: 1200, height: 800 });
}

// The backend's own view of the local user's chats of `mode`.
async function chats(mode) {
  const res = await fetch(`${BASE}/chat-history?mode=${mode}`);
  assert.equal(res.status, 200);
  return res.json();
}

let browser;

describe(`the page at ${BASE}/`, () => {
  before(async () => {
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  test('asks, streams a cited answer, opens the passage; usage; renames and deletes the chat; a file; Stop; multi-agent', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { page, seen } = await watchedPage(browser);

    // The page itself: public, HTML, its policy, and the configuration the server injected.
    const res = await page.goto(`${BASE}/`, { waitUntil: 'load' });
    assert.equal(res.status(), 200);
    assert.match(res.headers()['content-type'], /^text\/html/);
    assert.match(res.headers()['content-security-policy'] ?? '', /script-src 'sha256-/);
    const config = await page.$eval('script#page-config', (s) => JSON.parse(s.textContent));
    assert.equal(config.auth, 'none');

    // A streamed answer: watch the answer's text grow, then the citation.
    await page.evaluate(() => {
      window.__growth = [];
      new MutationObserver(() => {
        const answers = document.querySelectorAll('#log article.msg.assistant .body');
        const length = answers.length ? answers[answers.length - 1].textContent.length : 0;
        if (length && window.__growth.at(-1) !== length) window.__growth.push(length);
      }).observe(document.getElementById('log'), { subtree: true, childList: true, characterData: true });
    });
    const before = new Set((await chats('standard')).map((c) => c.id));
    step('asking');
    await ask(page, QUESTION);
    const CHIP = '#log article.msg.assistant button.cite[data-citation="Parental_Leave.md"]';
    await page.waitForSelector(CHIP);
    await turnDone(page);
    const chip = await page.waitForSelector(CHIP);
    const growth = await page.evaluate(() => window.__growth);
    step(`answer grew through ${growth.length} lengths`);
    assert.ok(growth.length >= 5, `the answer appeared as it streamed (lengths seen: ${JSON.stringify(growth)})`);
    assert.ok(growth.every((n, i) => i === 0 || n > growth[i - 1]), `the answer only grew: ${JSON.stringify(growth)}`);
    const answer = await page.$eval('#log article.msg.assistant .body', (b) => b.innerText);
    assert.match(answer, /16 weeks/, `the answer is grounded in the handbook: ${answer}`);
    assert.equal(await chip.evaluate((c) => c.textContent), '[Parental_Leave.md]');
    assert.ok(!/^#|\s#{1,6}\s/.test(answer), `no raw Markdown heading marks in the answer: ${answer}`);

    // The citation opens its passage, in a dialog that Escape closes.
    await chip.click();
    await page.waitForSelector('#passage-dialog[open]');
    const passage = await page.$eval('#passage-dialog', (d) => ({ title: d.querySelector('h2').textContent, text: d.querySelector('#passage-body').innerText }));
    assert.equal(passage.title, 'Parental_Leave.md');
    assert.match(passage.text, /16 weeks of fully paid parental leave/);
    await page.keyboard.press('Escape');
    await page.waitForSelector('#passage-dialog:not([open])');

    // The thoughts: the search and the token usage with its cost, in a panel that opens.
    await page.click('#log article.msg.assistant details.thoughts summary');
    const thoughts = await page.$eval('#log article.msg.assistant details.thoughts', (d) => ({ open: d.open, text: d.innerText }));
    assert.ok(thoughts.open);
    for (const title of ['Search using generated search query', 'Search results', 'Prompt to generate answer', 'Token usage']) {
      assert.ok(thoughts.text.includes(title), `the thoughts show "${title}"`);
    }
    assert.match(thoughts.text, /cost \$\d/);

    // Usage: this turn counted today.
    await showTab(page, 'usage');
    await page.waitForFunction(() => /Turns\s*[1-9]/.test(document.getElementById('usage-body').innerText));
    const usage = await page.$eval('#usage-body', (u) => u.innerText);
    assert.match(usage, /Today/);
    assert.match(usage, /This month/);
    assert.match(usage, /Cost\s*\$\d/);

    if (SHOTS) {
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, 'page-light.png') });
      await page.click('#log article.msg.assistant details.thoughts summary');
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
      await page.screenshot({ path: path.join(SHOTS, 'page-dark.png') });
      await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
      await page.setViewport({ width: 390, height: 844, deviceScaleFactor: 2 });
      await page.screenshot({ path: path.join(SHOTS, 'page-phone.png') });
      await page.setViewport({ width: 1200, height: 800 });
      step(`screenshots in ${SHOTS}`);
    } else {
      await page.click('#log article.msg.assistant details.thoughts summary');
    }
    assert.equal(await page.$eval('#log article.msg.assistant details.thoughts', (d) => d.open), false, 'the thoughts panel closes');

    // History: the chat is listed under its question; rename it from the list, by keyboard.
    await showTab(page, 'chats');
    const [chat] = (await chats('standard')).filter((c) => c.title === QUESTION && !before.has(c.id));
    assert.ok(chat, 'the turn was stored as a chat titled by its question');
    const item = `#history-list li[data-id="${chat.id}"]`;
    await page.waitForSelector(item);
    assert.equal(await page.$eval(`${item} .open`, (b) => b.getAttribute('aria-current')), 'true');
    await page.click(`${item} .rename`);
    await page.waitForSelector('#rename-dialog[open]');
    await page.$eval('#rename-input', (i) => i.select());
    await page.keyboard.type('Parental leave, renamed');
    await page.keyboard.press('Enter');
    await page.waitForFunction((sel) => document.querySelector(`${sel} .open`)?.textContent.startsWith('Parental leave, renamed'), {}, item);
    const renamed = (await chats('standard')).find((c) => c.id === chat.id);
    assert.equal(renamed?.title, 'Parental leave, renamed', 'the backend has the new title');
    assert.equal(renamed.messageCount, chat.messageCount, 'a rename keeps the messages');

    // Open it again from the list: its messages come back.
    await page.click('#new-chat');
    await page.waitForFunction(() => document.querySelectorAll('#log .msg').length === 0);
    await page.click(`${item} .open`);
    await page.waitForFunction((q) => document.querySelector('#log .msg.user')?.innerText.includes(q), {}, QUESTION);
    assert.match(await page.$eval('#log article.msg.assistant .body', (b) => b.innerText), /16 weeks/);

    // Delete it.
    await page.click(`${item} .delete`);
    await page.waitForSelector('#delete-dialog[open]');
    await page.click('#delete-confirm');
    await page.waitForFunction((sel) => !document.querySelector(sel), {}, item);
    assert.ok(!(await chats('standard')).some((c) => c.id === chat.id), 'the backend no longer has the chat');

    // A file with the question: sent as a multipart part, named in the message and in the thoughts.
    step('a file');
    const input = await page.$('#files');
    await input.uploadFile(path.join(HERE, '..', '..', 'samples', 'knowledge-base', 'Parental_Leave.md'));
    await page.waitForFunction(() => document.getElementById('chosen').innerText.includes('Parental_Leave.md'));
    await ask(page, 'What is in this file?');
    await page.waitForFunction(() => document.querySelector('#log .msg.user .files')?.innerText.includes('Parental_Leave.md'));
    await turnDone(page);
    assert.ok(!(await page.$('#log .error')), 'no error with the file');
    const fileThoughts = await page.$eval('#log article.msg.assistant details.thoughts', (d) => d.textContent);
    assert.match(fileThoughts, /Files sent to the model/);
    assert.match(fileThoughts, /Parental_Leave\.md/);

    // Stop: the answer stops where it was, and says so.
    await page.click('#new-chat');
    await ask(page, 'Tell me everything about the benefit options, please');
    await page.waitForFunction(() => document.querySelector('#log article.msg.assistant .body')?.textContent.length > 10);
    await page.click('#stop');
    await turnDone(page);
    await page.waitForSelector('#log article.msg.assistant .stopped');
    assert.ok(!(await page.$('#log .error')), 'a stop is no error');
    // The one request the page was told to abort.
    const aborted = seen.failed.filter((f) => /^POST .*\/chat\/stream: net::ERR_ABORTED$/.test(f));
    assert.equal(aborted.length, 1, `the stream was aborted: ${JSON.stringify(seen.failed)}`);
    seen.failed = seen.failed.filter((f) => !aborted.includes(f));

    // Multi-agent mode: each agent's message as it arrives (the local model is paced, so they come apart).
    step('multi-agent');
    const earlier = new Set((await chats('multiAgent')).map((c) => c.id));
    await page.click('input[name="mode"][value="multiAgent"]');
    await page.evaluate(() => {
      window.__agentBatches = [];
      new MutationObserver(() => {
        window.__agentBatches.push(document.querySelectorAll('#log article.msg.assistant').length);
      }).observe(document.getElementById('log'), { childList: true });
    });
    await ask(page, 'Plan the tent launch');
    await page.waitForFunction((n) => document.querySelectorAll('#log article.msg.assistant').length >= n, {}, AGENTS.length);
    await turnDone(page);
    const who = await page.$$eval('#log article.msg.assistant .who', (w) => w.map((x) => x.textContent));
    assert.deepEqual(who.slice(0, AGENTS.length), AGENTS, `the agents answer in turn: ${JSON.stringify(who)}`);
    assert.ok(!(await page.$('#log .error')), 'no error in the round');
    const batches = await page.evaluate(() => [...new Set(window.__agentBatches)]);
    assert.ok(batches.length >= 2, `the agents' messages appeared one by one: ${JSON.stringify(batches)}`);
    const rounds = (await chats('multiAgent')).filter((c) => !earlier.has(c.id));
    assert.equal(rounds.length, 1, 'the round is kept in history, in one chat');
    assert.equal(rounds[0].title, 'Plan the tent launch');
    assert.ok(rounds[0].messageCount >= AGENTS.length + 1);
    await page.waitForSelector(`#history-list li[data-id="${rounds[0].id}"]`);

    assertQuiet(seen);
    assert.ok(seen.calls.includes('PATCH /chat-history/' + chat.id), 'the rename was a PATCH');
    await page.close();
  });

  test('a link the model wrote to another site shows its host and opens only from a dialog showing the whole address', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { page, seen } = await watchedPage(browser);
    const collector = [];
    page.on('request', (r) => new URL(r.url()).host === 'collector.example' && collector.push(r.url()));
    await page.goto(`${BASE}/`, { waitUntil: 'load' });
    const address = 'https://collector.example/c?q=parental+leave+16+weeks';
    // The local model says exactly this: a link carrying words of the conversation out in its query.
    await ask(page, `[[say:See [the notes](${address}) for more.]]`);
    await turnDone(page);
    const LINK = '#log article.msg.assistant button.model-link';
    const link = await page.waitForSelector(LINK);
    assert.equal(await link.evaluate((a) => a.textContent), 'the notes (collector.example)', 'the host beside the text');
    assert.equal(await link.evaluate((a) => a.getAttribute('href')), null, 'no address to open around the dialog');
    const pagesBefore = (await browser.pages()).length;
    await link.click();
    await page.waitForSelector('#link-dialog[open]');
    assert.equal(await page.$eval('#link-address', (p) => p.textContent), address, 'the whole address is shown');
    assert.equal(await page.$eval('#link-open', (a) => a.getAttribute('href')), address);
    assert.equal(await page.$eval('#link-open', (a) => a.getAttribute('rel')), 'noopener noreferrer');
    assert.equal((await browser.pages()).length, pagesBefore, 'the click on the link itself opened nothing');
    assert.deepEqual(collector, [], 'nothing was sent to the link');
    await page.click('#link-cancel');
    await page.waitForSelector('#link-dialog:not([open])');
    assert.equal((await browser.pages()).length, pagesBefore, 'Cancel opened nothing');
    assert.deepEqual(seen.console, [], 'console errors');
    assert.deepEqual(seen.pageErrors, [], 'script errors');
    await page.close();
  });

  test('API keys: makes a key shown once with a copy button, lists it, the key acts as the user, revokes it', { timeout: TEST_TIMEOUT_MS }, async () => {
    await browser.defaultBrowserContext().overridePermissions(BASE, ['clipboard-read', 'clipboard-write', 'clipboard-sanitized-write']);
    const { page, seen } = await watchedPage(browser);
    await page.goto(`${BASE}/`, { waitUntil: 'load' });
    await page.waitForSelector('#api-keys:not([hidden])');
    await showTab(page, 'api-keys');
    const name = `page key ${Date.now()}`;
    await page.type('#api-key-name', name);
    await page.type('#api-key-days', '7');
    await page.click('#api-key-create');
    await page.waitForSelector('#api-key-new:not([hidden])');
    const key = await page.$eval('#api-key-value', (i) => i.value);
    assert.match(key, /^cbk_[A-Za-z0-9_-]{43}$/);
    await page.click('#api-key-copy');
    await page.waitForFunction(() => document.getElementById('api-key-copy').textContent === 'Copied');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key, 'the key is on the clipboard');

    // Listed by name and hint, never the key itself.
    const item = await page.waitForSelector(`xpath///ul[@id="api-key-list"]/li[contains(., "${name}")]`);
    const text = await item.evaluate((li) => li.textContent);
    assert.ok(text.includes(`cbk_…${key.slice(-4)}`), text);
    assert.ok(!text.includes(key), 'the list never shows the key');
    assert.match(text, /never used/);
    assert.match(text, /expires/);
    const id = await item.evaluate((li) => li.dataset.id);

    // The key acts as the page's user: it lists the same chats.
    const byKey = await fetch(`${BASE}/chat-history?mode=standard`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(byKey.status, 200);
    assert.deepEqual((await byKey.json()).map((c) => c.id), (await chats('standard')).map((c) => c.id));

    // Revoked through its dialog: gone from the list, and refused.
    await (await item.$('button.revoke')).click();
    await page.waitForSelector('#revoke-dialog[open]');
    // The dialog says how soon: within the key cache's life on the server's instances, not at once.
    assert.match(await page.$eval('#revoke-text', (e) => e.textContent), /within the time the server keeps a key it has checked: a minute, unless the operator set API_KEY_CACHE_SECONDS otherwise/);
    await page.click('#revoke-confirm');
    await page.waitForFunction((gone) => !document.querySelector(`#api-key-list li[data-id="${gone}"]`), {}, id);
    const refused = await fetch(`${BASE}/chat-history?mode=standard`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(refused.status, 401);

    assertQuiet(seen);
    await page.close();
  });

  test('Documents: uploads (picker and drop), sees the status pushed to indexed, asks and sees the citation, deletes', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { page, seen } = await watchedPage(browser);
    const config = await (await fetch(`${BASE}/`)).text();
    assert.match(config, /"documents":true/, 'the server tells the page that documents are on');
    await page.goto(`${BASE}/`, { waitUntil: 'load' });
    await page.waitForSelector('#documents:not([hidden])');
    await showTab(page, 'documents');
    // The local user is no document administrator: no access chooser.
    assert.equal(await page.$eval('#doc-access', (f) => f.hidden), true, 'no access chooser for a non-administrator');

    // A Markdown file holding a made-up fact, picked with the file input (as the keyboard and the label reach it).
    const stamp = Date.now().toString(36);
    const name = `Quorvex_Lighthouse_${stamp}.md`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'page-documents-'));
    const file = path.join(dir, name);
    fs.writeFileSync(file, `# The quorvex lighthouse\n\nThe quorvex lighthouse keeps a brass telescope named Miranda${stamp}.\n`);
    // Every status the list shows for it, in order.
    await page.evaluate((n) => {
      window.__docStatuses = [];
      new MutationObserver(() => {
        const li = [...document.querySelectorAll('#doc-list li')].find((l) => l.querySelector('.name')?.textContent === n);
        const status = li?.dataset.status;
        if (status && window.__docStatuses.at(-1) !== status) window.__docStatuses.push(status);
      }).observe(document.getElementById('doc-list'), { subtree: true, childList: true, characterData: true, attributes: true });
    }, name);
    step('uploading a document');
    const callsBefore = seen.calls.length;
    const input = await page.$('#doc-files');
    await input.uploadFile(file);
    const item = await page.waitForSelector(`xpath///ul[@id="doc-list"]/li[.//span[@class="name" and text()="${name}"]]`);
    await page.waitForFunction((li) => li.dataset.status === 'indexed', { timeout: STEP_TIMEOUT_MS }, item);
    const statuses = await page.evaluate(() => window.__docStatuses);
    step(`statuses shown: ${statuses.join(' → ')}`);
    assert.equal(statuses[0], 'pending', `the upload answered pending first: ${statuses}`);
    assert.equal(statuses.at(-1), 'indexed');
    const meta = await item.evaluate((li) => li.querySelector('.meta').textContent);
    assert.match(meta, /^markdown · \d+ B · indexed$/, meta);
    const after = seen.calls.slice(callsBefore);
    assert.ok(after.includes('POST /documents'), `the upload was a POST /documents: ${after}`);
    assert.ok(after.includes('GET /documents/events'), `the status was pushed (GET /documents/events): ${after}`);
    assert.ok(!after.includes('GET /documents'), `no polling of the list: ${after}`);
    assert.match(await page.$eval('#doc-status', (s) => s.textContent), /indexed/, 'the change is announced');
    const id = await item.evaluate((li) => li.dataset.id);
    const stored = await (await fetch(`${BASE}/documents/${id}`)).json();
    assert.equal(stored.status, 'indexed');
    assert.equal(stored.name, name);

    if (SHOTS) {
      fs.mkdirSync(SHOTS, { recursive: true });
      const panel = await page.$('#documents');
      await panel.screenshot({ path: path.join(SHOTS, 'page-documents.png') });
    }

    // Asked about it: the streamed answer cites the uploaded file.
    step('asking about it');
    await ask(page, `What is the brass telescope at the quorvex lighthouse named?`);
    const CHIP = `#log article.msg.assistant button.cite[data-citation="${name}"]`;
    await page.waitForSelector(CHIP);
    await turnDone(page);
    const answer = await page.$eval('#log article.msg.assistant .body', (b) => b.innerText);
    assert.ok(answer.includes(`Miranda${stamp}`), `the answer is grounded in the upload: ${answer}`);

    // Deleted through its dialog: gone from the list and the backend.
    step('deleting it');
    await (await item.$('button.delete')).click();
    await page.waitForSelector('#doc-delete-dialog[open]');
    await page.click('#doc-delete-confirm');
    await page.waitForFunction((i) => !document.querySelector(`#doc-list li[data-id="${i}"]`), {}, id);
    assert.equal((await fetch(`${BASE}/documents/${id}`)).status, 404, 'the backend no longer has it');

    // Asked again in a new chat: no citation of it, no word of its fact.
    await page.click('#new-chat');
    await ask(page, `What is the brass telescope at the quorvex lighthouse named?`);
    await turnDone(page);
    assert.equal(await page.$(CHIP), null, 'the deleted document is no longer cited');
    const again = await page.$eval('#log article.msg.assistant .body', (b) => b.innerText);
    assert.ok(!again.includes(`Miranda${stamp}`), `the deleted document's fact is gone: ${again}`);

    // A file dropped on the drop zone (a drop event carrying the file, as a drag from the desktop delivers it).
    step('dropping a document');
    const dropped = `Dropped_${stamp}.md`;
    await page.$eval('#doc-drop', (zone, n) => {
      const data = new DataTransfer();
      data.items.add(new File([`# Dropped\n\nThe dropped note mentions the velkari bridge.\n`], n, { type: 'text/markdown' }));
      zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true }));
      zone.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
    }, dropped);
    const droppedItem = await page.waitForSelector(`xpath///ul[@id="doc-list"]/li[.//span[@class="name" and text()="${dropped}"]]`);
    await page.waitForFunction((li) => li.dataset.status === 'indexed', { timeout: STEP_TIMEOUT_MS }, droppedItem);
    assert.equal(await page.$eval('#doc-drop', (z) => z.classList.contains('over')), false, 'the drop zone is no longer highlighted');
    const droppedId = await droppedItem.evaluate((li) => li.dataset.id);
    await (await droppedItem.$('button.delete')).click();
    await page.waitForSelector('#doc-delete-dialog[open]');
    await page.click('#doc-delete-confirm');
    await page.waitForFunction((i) => !document.querySelector(`#doc-list li[data-id="${i}"]`), {}, droppedId);

    fs.rmSync(dir, { recursive: true, force: true });
    assertQuiet(seen);
    await page.close();
  });

  test('Documents, as an administrator would: the access chooser sends groups or everyone with the upload', { timeout: TEST_TIMEOUT_MS }, async () => {
    // The local user is no document administrator: the settings' answer is made to say so here, to see what the page
    // offers one and sends; the real backend then refuses the share (403), which the page shows.
    const { page, seen } = await watchedPage(browser);
    const posted = [];
    await page.setRequestInterception(true);
    page.on('request', async (r) => {
      const url = new URL(r.url());
      if (r.method() === 'GET' && url.pathname === '/documents/settings') {
        return r.respond({ status: 200, contentType: 'application/json',
          body: JSON.stringify({ administrator: true, everyone_group: 'everyone', max_bytes: 4194304, max_per_upload: 10 }) });
      }
      // A multipart body's file parts are not in postData(): the browser hands them over when asked.
      if (r.method() === 'POST' && url.pathname === '/documents') posted.push(r.postData() || (await r.fetchPostData()) || '');
      return r.continue();
    });
    await page.goto(`${BASE}/`, { waitUntil: 'load' });
    await page.waitForSelector('#doc-access:not([hidden])');
    await showTab(page, 'documents');
    assert.equal(await page.$eval('input[name="doc-access"]:checked', (r) => r.value), 'me', 'only me by default');
    assert.equal(await page.$eval('#doc-groups', (i) => i.disabled), true);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'page-documents-'));
    const file = path.join(dir, 'Shared_Plan.md');
    fs.writeFileSync(file, '# Plan\n\nThe plan is shared.\n');

    // Groups: the box opens for names; an empty one is asked for before anything is sent.
    await page.click('input[name="doc-access"][value="groups"]');
    await page.waitForFunction(() => !document.getElementById('doc-groups').disabled && document.activeElement.id === 'doc-groups');
    await (await page.$('#doc-files')).uploadFile(file);
    await page.waitForFunction(() => /at least one group/.test(document.getElementById('doc-error').innerText));
    assert.equal(posted.length, 0, 'nothing sent without a group');
    await page.type('#doc-groups', 'leadership, finance');
    await (await page.$('#doc-files')).uploadFile(file);
    await page.waitForFunction(() => /administrator/.test(document.getElementById('doc-error').innerText));
    assert.equal(posted.length, 1);
    assert.match(posted[0], /name="groups"\r\n\r\nleadership, finance\r\n/, 'the groups part');
    assert.match(posted[0], /name="files"; filename="Shared_Plan.md"/, 'the file part');
    assert.doesNotMatch(posted[0], /name="everyone"/);

    // Everyone: the groups box closes, and `everyone=true` goes instead.
    await page.click('input[name="doc-access"][value="everyone"]');
    assert.equal(await page.$eval('#doc-groups', (i) => i.disabled), true);
    await (await page.$('#doc-files')).uploadFile(file);
    for (const started = Date.now(); posted.length < 2 && Date.now() - started < STEP_TIMEOUT_MS;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(posted.length, 2);
    await page.waitForFunction(() => /administrator/.test(document.getElementById('doc-error').innerText)
      && document.getElementById('doc-status').textContent === '');
    assert.match(posted[1], /name="everyone"\r\n\r\ntrue\r\n/, 'the everyone part');
    assert.doesNotMatch(posted[1], /name="groups"/);

    fs.rmSync(dir, { recursive: true, force: true });
    // The refused shares were the backend's 403s, shown in the panel; nothing else failed.
    assert.equal(seen.bad.length, 2, JSON.stringify(seen.bad));
    assert.ok(seen.bad.every((b) => /^POST .*\/documents -> 403$/.test(b)), JSON.stringify(seen.bad));
    assert.ok(seen.console.every((c) => /status of 403/.test(c)), JSON.stringify(seen.console));
    assert.deepEqual(seen.failed, [], 'failed requests');
    assert.deepEqual(seen.pageErrors, [], 'script errors');
    await page.close();
  });
});
