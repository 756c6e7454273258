// The backend's own page (web/index.html, served at `/`) in JWT mode, in headless Chromium: it signs in against the
// local OpenID Connect issuer (oidc-issuer.mjs, started here) with the authorization code and PKCE, chats with a
// Bearer token it keeps in memory only, and renews the token before it expires.
//
//   CHAT_AUTH=jwt CHAT_BASE_URL=http://127.0.0.1:9080 OIDC_PORT=9081 OIDC_CLIENT_ID=chat-page \
//     [OIDC_TOKEN_LIFETIME_SECONDS=45] [OIDC_KEY_FILE=…] node --test tests/browser/page-jwt.test.mjs
//
// against a local run started with AUTH_MODE=jwt, JWT_ISSUER=http://127.0.0.1:9081, JWT_AUDIENCE=chat-page,
// JWKS_URL=http://127.0.0.1:9081/jwks, PAGE_OIDC_CLIENT_ID=chat-page (tests/suites.py, "page (JWT)", does this), and
// retrieval off (the local model answers `Echo: <question>`). Without CHAT_AUTH=jwt it is skipped: the ChatUI browser
// runs point CHAT_BASE_URL at a backend that is not in JWT mode.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './chromium.mjs';
import { start } from './oidc-issuer.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BASE = (process.env.CHAT_BASE_URL ?? 'http://127.0.0.1:9080').replace(/\/+$/, '');
const PORT = Number(process.env.OIDC_PORT ?? 9081);
const CLIENT_ID = process.env.OIDC_CLIENT_ID ?? 'chat-page';
// Short, so that the page must renew within the test. The backend accepts a token up to 60 s past its `exp` (clock
// skew), so the test waits that long past the first token's expiry before it proves the renewal was needed.
const LIFETIME = Number(process.env.OIDC_TOKEN_LIFETIME_SECONDS ?? 45);
const SKEW = 60;
const STEP_TIMEOUT_MS = 60000;
const TEST_TIMEOUT_MS = (LIFETIME + SKEW) * 1000 + 240000;
const T0 = Date.now();
const step = (what) => process.env.CHATUI_DEBUG && process.stderr.write(`[${((Date.now() - T0) / 1000).toFixed(1)}s] ${what}\n`);

let issuer;
let browser;

async function launch() {
  return launchChromium({ width: 1200, height: 800 });
}

// What the page did on the network and in its console.
function watch(page) {
  const seen = { api: [], failed: [], bad: [], console: [], pageErrors: [], issuer: [] };
  const isApi = (url) => url.startsWith(`${BASE}/`) && new URL(url).pathname !== '/';
  page.on('pageerror', (e) => seen.pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && seen.console.push(`${m.text()} (${m.location()?.url ?? ''})`));
  page.on('requestfailed', (r) => {
    // A navigation the page leaves (to the issuer and back) may abort what was in flight; anything else is a failure.
    if (r.failure()?.errorText === 'net::ERR_ABORTED' && r.isNavigationRequest()) return;
    seen.failed.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`);
  });
  page.on('request', (r) => {
    if (r.url().startsWith(issuer.url)) seen.issuer.push(`${r.method()} ${new URL(r.url()).pathname}`);
    if (isApi(r.url()) && r.method() !== 'OPTIONS') {
      seen.api.push({ method: r.method(), url: r.url(), authorization: r.headers().authorization, at: Date.now() });
    }
  });
  page.on('response', (r) => {
    if (r.status() >= 400) seen.bad.push(`${r.request().method()} ${r.url()} -> ${r.status()}`);
  });
  return seen;
}

// Signs in on the issuer's form as `username`, from wherever the page sent the browser; back on the page after.
async function signInOnIssuer(page, username) {
  // The page goes to the issuer by itself, or offers a button that does.
  const atIssuer = () => page.url().startsWith(`${issuer.url}/authorize`);
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (!atIssuer()) {
    if (Date.now() > deadline) throw new Error(`the page did not send the browser to the issuer (at ${page.url()})`);
    const button = await page.$('::-p-aria([name=/^sign in/i][role="button"])');
    if (button) {
      step('clicking the page\'s sign-in button');
      await Promise.all([page.waitForNavigation({ timeout: STEP_TIMEOUT_MS }), button.click()]);
    } else {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  step(`at the issuer: ${page.url()}`);
  const request = new URL(page.url()).searchParams;
  await page.waitForSelector('#username');
  await page.type('#username', username);
  await Promise.all([page.waitForNavigation({ timeout: STEP_TIMEOUT_MS }), page.click('button[type="submit"]')]);
  // Back on the page (after the redirect with the code).
  await page.waitForFunction((base) => location.href.startsWith(`${base}/`), { timeout: STEP_TIMEOUT_MS }, BASE);
  step(`back on the page: ${page.url()}`);
  return request;
}

// The question box.
const questionBox = (page) => page.waitForSelector('textarea', { visible: true, timeout: STEP_TIMEOUT_MS });

// Asks `text` and waits for the whole answer, `Echo: <text>`; returns the lengths of the answer seen as it grew.
async function ask(page, text) {
  const expected = `Echo: ${text}`;
  // Watch the answer grow: every change of the page's text, the part after the last `Echo: ` that is a prefix of
  // the expected answer.
  await page.evaluate((expected) => {
    window.__growth = [];
    window.__observer?.disconnect();
    window.__observer = new MutationObserver(() => {
      const all = document.body.innerText;
      const at = all.lastIndexOf('Echo: ');
      if (at < 0) return;
      const shown = all.slice(at).split('\n')[0].trimEnd();
      if (expected.startsWith(shown) && window.__growth.at(-1) !== shown.length) window.__growth.push(shown.length);
    });
    window.__observer.observe(document.body, { subtree: true, childList: true, characterData: true });
  }, expected);
  const box = await questionBox(page);
  await box.click();
  await box.type(text);
  await page.keyboard.press('Enter');
  await page.waitForFunction((expected) => document.body.innerText.includes(expected), { timeout: STEP_TIMEOUT_MS }, expected);
  return page.evaluate(() => {
    window.__observer.disconnect();
    return window.__growth;
  });
}

async function until(condition, what) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const bearer = (call) => call.authorization?.match(/^Bearer (.+)$/)?.[1];

const SKIP = process.env.CHAT_AUTH === 'jwt' ? false : 'set CHAT_AUTH=jwt and CHAT_BASE_URL to a local run in JWT mode';

describe(`the page at ${BASE}/ signs in with OpenID Connect and chats`, { skip: SKIP }, () => {
  before(async () => {
    issuer = await start({
      port: PORT,
      clientId: CLIENT_ID,
      redirectUris: [`${BASE}/`],
      tokenLifetimeSeconds: LIFETIME,
      keyFile: process.env.OIDC_KEY_FILE,
    });
    step(`issuer on ${issuer.url}`);
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await issuer?.close();
  });

  test('sign in as alice (code + PKCE), chat with a Bearer token kept in memory, renewed before it expires', { timeout: TEST_TIMEOUT_MS }, async () => {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    const seen = watch(page);
    try {
      // The page is public; its configuration says JWT and names the issuer and the client.
      const res = await page.goto(`${BASE}/`, { waitUntil: 'load' });
      assert.equal(res.status(), 200);
      const config = await page
        .$eval('script#page-config', (s) => JSON.parse(s.textContent))
        .catch(() => null); // the browser may be at the issuer already
      if (config) {
        assert.equal(config.auth, 'jwt');
        assert.equal(config.oidc?.clientId, CLIENT_ID);
        assert.equal(config.oidc?.issuer, issuer.url);
      }

      const request = await signInOnIssuer(page, 'alice');
      // The authorization request the page made: code flow, S256, its own address back, a state and a nonce.
      assert.equal(request.get('response_type'), 'code');
      assert.equal(request.get('client_id'), CLIENT_ID);
      assert.equal(request.get('redirect_uri'), `${BASE}/`);
      assert.equal(request.get('code_challenge_method'), 'S256');
      assert.match(request.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
      assert.ok((request.get('state') ?? '').length >= 16, 'a state of some strength');
      assert.ok((request.get('nonce') ?? '').length >= 16, 'a nonce of some strength');
      assert.ok(request.get('scope').split(' ').includes('openid'));
      // The code leaves the address bar (and so the history and a bookmark), and is exchanged once.
      await page.waitForFunction(() => !new URL(location.href).searchParams.has('code'), { timeout: STEP_TIMEOUT_MS });
      await until(() => issuer.counts.grants.authorization_code > 0, 'the page exchanges its code');
      assert.equal(issuer.counts.grants.authorization_code, 1, 'the page exchanged its code once');
      assert.equal(issuer.counts.signIns, 1);

      // A streamed answer.
      const question = 'How many weeks of parental leave do employees get in this plan of ours overall?';
      const growth = await ask(page, question);
      step(`answer grew through ${growth.length} lengths`);
      assert.ok(growth.length >= 3, `the answer appeared as it streamed (lengths seen: ${JSON.stringify(growth)})`);

      // Every API call carried a Bearer token the issuer issued to alice.
      const calls = seen.api.filter((c) => c.at);
      assert.ok(calls.some((c) => c.method === 'POST' && /\/chat\/stream$/.test(new URL(c.url).pathname)), `the page streamed the chat: ${JSON.stringify(calls.map((c) => c.url))}`);
      const first = issuer.issued.find((t) => t.grant === 'authorization_code' && t.token === bearer(calls[0]));
      assert.ok(first, `the first call's token is one the issuer issued: ${calls[0].authorization?.slice(0, 20)}`);
      for (const c of calls) {
        const t = issuer.issued.find((i) => i.token === bearer(c));
        assert.ok(t, `${c.method} ${c.url} carries an issued token`);
        assert.equal(t.sub, 'alice');
      }

      // Tokens in memory only: nothing issued is in localStorage, sessionStorage or a cookie.
      const stores = await page.evaluate(() => ({ localStorage: { ...localStorage }, sessionStorage: { ...sessionStorage }, cookie: { cookie: document.cookie } }));
      const tokens = [...issuer.issued.map((t) => [`the ${t.kind} token`, t.token]), ...issuer.issuedRefreshTokens.map((t) => ['the refresh token', t])];
      for (const [store, entries] of Object.entries(stores)) {
        for (const [key, value] of Object.entries(entries)) {
          const found = tokens.find(([, t]) => value.includes(t));
          assert.ok(!found, `${found?.[0]} is kept in ${store} (${JSON.stringify(key)})`);
        }
      }

      // Renewal: past the first token's expiry and the backend's skew, the page asks again and is answered.
      const wait = (first.exp + SKEW + 2) * 1000 - Date.now();
      step(`waiting ${Math.round(wait / 1000)} s for the first token to expire for the backend too`);
      await new Promise((r) => setTimeout(r, wait));
      assert.ok(issuer.counts.grants.refresh_token >= 1, `the page renewed with its refresh token (grants ${JSON.stringify(issuer.counts.grants)})`);
      assert.equal(issuer.counts.signIns, 1, 'renewed without signing in again');
      const stale = await fetch(`${BASE}/chat-history?mode=standard&limit=1`, { headers: { Authorization: `Bearer ${first.token}` } });
      assert.equal(stale.status, 401, 'the first token is refused by now, so the next answer needs the renewed one');
      const callsBefore = seen.api.length;
      const again = 'And what about the second question asked after the token was renewed?';
      await ask(page, again);
      const later = seen.api.slice(callsBefore);
      assert.ok(later.length > 0);
      for (const c of later) {
        const t = issuer.issued.find((i) => i.token === bearer(c));
        assert.ok(t, `${c.method} ${c.url} carries an issued token`);
        assert.equal(t.grant, 'refresh_token', `${c.method} ${c.url} carries a renewed token`);
        assert.ok(t.exp * 1000 > c.at, 'a token not yet expired');
      }

      assert.deepEqual(seen.failed, [], 'failed requests');
      assert.deepEqual(seen.bad, [], 'answers of 400 and above');
      assert.deepEqual(seen.console, [], 'console errors');
      assert.deepEqual(seen.pageErrors, [], 'script errors');
    } finally {
      await context.close();
    }
  });
});
