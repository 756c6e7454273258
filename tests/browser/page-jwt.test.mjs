// The backend's own page (web/index.html, served at `/`) in JWT mode, in headless Chromium: it signs in against the
// local OpenID Connect issuer (oidc-issuer.mjs, started here) with the authorization code and PKCE, chats with a
// Bearer token it keeps in memory only, and renews the token before it expires: with the refresh token, or, when the
// issuer gives none, silently with prompt=none. Signing out revokes the refresh token and ends the issuer's session
// (RP-initiated logout, and Cognito's /logout); a question sent after the sign-in ended is sent once signed in again;
// the page's policy names only itself and the issuer.
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
import { assertQuiet } from './page-steps.mjs';

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
  const seen = { api: [], failed: [], bad: [], console: [], pageErrors: [], issuer: [], issuerUrls: [], navigations: [] };
  const isApi = (url) => url.startsWith(`${BASE}/`) && new URL(url).pathname !== '/';
  page.on('pageerror', (e) => seen.pageErrors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && seen.console.push(`${m.text()} (${m.location()?.url ?? ''})`));
  page.on('requestfailed', (r) => {
    // A navigation the page leaves (to the issuer and back) may abort what was in flight; anything else is a failure.
    if (r.failure()?.errorText === 'net::ERR_ABORTED' && r.isNavigationRequest()) return;
    seen.failed.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`);
  });
  page.on('request', (r) => {
    if (r.url().startsWith(issuer.url)) {
      seen.issuer.push(`${r.method()} ${new URL(r.url()).pathname}`);
      seen.issuerUrls.push({ url: r.url(), frame: r.frame() === page.mainFrame() ? 'main' : 'sub', at: Date.now() });
    }
    if (isApi(r.url()) && r.method() !== 'OPTIONS') {
      seen.api.push({ method: r.method(), url: r.url(), authorization: r.headers().authorization, body: r.postData(), at: Date.now() });
    }
  });
  // Where the page itself (not a frame in it) went.
  page.on('framenavigated', (f) => f === page.mainFrame() && seen.navigations.push({ url: f.url(), at: Date.now() }));
  page.on('response', (r) => {
    if (r.status() >= 400) seen.bad.push(`${r.request().method()} ${r.url()} -> ${r.status()}`);
  });
  return seen;
}

// Signs in on the issuer's form as `username`, from wherever the page sent the browser; back on the page after.
async function signInOnIssuer(page, username) {
  // The page goes to the issuer by itself, or offers a button that does (/authorize, or Cognito's /oauth2/authorize).
  const atIssuer = () => page.url().startsWith(issuer.url) && new URL(page.url()).pathname.endsWith('/authorize');
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (!atIssuer()) {
    if (Date.now() > deadline) throw new Error(`the page did not send the browser to the issuer (at ${page.url()})`);
    // The page may be leaving for the issuer while it is looked at: then it is looked at again.
    const button = await page.$('::-p-aria([name=/^sign in/i][role="button"])').catch(() => null);
    if (button && !atIssuer()) {
      step('clicking the page\'s sign-in button');
      await Promise.all([page.waitForNavigation({ timeout: STEP_TIMEOUT_MS }), button.click()]).catch(() => {});
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

async function until(condition, what, timeoutMs = STEP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const bearer = (call) => call.authorization?.match(/^Bearer (.+)$/)?.[1];

// What the page keeps in localStorage, sessionStorage and cookies that is a token the issuer issued: none may be.
async function tokensKept(page) {
  const stores = await page.evaluate(() => ({ localStorage: { ...localStorage }, sessionStorage: { ...sessionStorage }, cookie: { cookie: document.cookie } }));
  const tokens = [...issuer.issued.map((t) => [`the ${t.kind} token`, t.token]), ...issuer.issuedRefreshTokens.map((t) => ['the refresh token', t])];
  const found = [];
  for (const [store, entries] of Object.entries(stores)) {
    for (const [key, value] of Object.entries(entries)) {
      const token = tokens.find(([, t]) => value.includes(t));
      if (token) found.push(`${token[0]} in ${store} (${JSON.stringify(key)})`);
    }
  }
  return found;
}

// A browser context's page on the page's address, watched, signed in as `username`; the first question answered.
async function signedIn(username, question) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  const seen = watch(page);
  await page.goto(`${BASE}/`, { waitUntil: 'load' });
  await signInOnIssuer(page, username);
  await page.waitForFunction(() => !new URL(location.href).searchParams.has('code'), { timeout: STEP_TIMEOUT_MS });
  await ask(page, question);
  // The turn is over (the stream ended), so that nothing is in flight when the test goes on.
  await page.waitForFunction(() => document.getElementById('log').getAttribute('aria-busy') === 'false'
    && document.getElementById('stop').disabled, { timeout: STEP_TIMEOUT_MS });
  return { context, page, seen };
}

// Nothing failed on the way: no failed request, no answer of 400 or more, no console error (a policy violation is
// one), no script error.
function clean(seen) {
  assertQuiet(seen);
}

// The sign-in state the page shows: its account area and its notice.
const shown = (page) => page.evaluate(() => ({
  account: document.getElementById('account').innerText,
  notice: document.getElementById('notice').innerText,
  signInButton: [...document.querySelectorAll('button')].some((b) => /^sign in$/i.test(b.textContent.trim())),
}));

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
      await stale.text();
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

      assertQuiet(seen);
    } finally {
      await context.close();
    }
  });

  test("the page's policy lets it reach only itself and the issuer, and frame only them", async () => {
    const res = await fetch(`${BASE}/`);
    assert.equal(res.status, 200);
    await res.text();
    const policy = Object.fromEntries(res.headers.get('content-security-policy').split(';').map((d) => d.trim()).filter(Boolean)
      .map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]));
    // The local run serves every route on the page's own origin (PAGE_CHAT_URL and PAGE_STREAM_URL empty).
    assert.equal(policy['connect-src'], `'self' ${issuer.url}`);
    assert.equal(policy['img-src'], `'self' ${issuer.url}`);
    assert.equal(policy['frame-src'], `'self' ${issuer.url}`);
    assert.equal(policy['frame-ancestors'], "'self'");
    assert.equal(policy['default-src'], "'none'");
  });

  for (const flavour of ['oidc', 'cognito']) {
    const how = flavour === 'cognito'
      ? "Cognito's hosted UI (no revocation or end-session endpoint in discovery): /oauth2/revoke, then /logout"
      : 'the discovery document\'s revocation_endpoint, then its end_session_endpoint';
    test(`signing out revokes the refresh token and ends the issuer's session: ${how}`, { timeout: 4 * STEP_TIMEOUT_MS }, async () => {
      issuer.configure({ flavour, refreshTokens: true, tokenLifetimeSeconds: LIFETIME });
      const username = flavour === 'cognito' ? 'dave' : 'carol';
      const { context, page, seen } = await signedIn(username, `A question from ${username} before signing out?`);
      try {
        const refreshToken = issuer.issuedRefreshTokens.at(-1);
        const idToken = issuer.issued.filter((t) => t.kind === 'id' && t.sub === username).at(-1).token;
        const revocations = issuer.revocations.length;
        const ends = issuer.endSessionRequests.length;
        const forms = issuer.counts.forms;
        step('signing out');
        const button = await page.waitForSelector('::-p-aria([name="Sign out"][role="button"])');
        await Promise.all([page.waitForNavigation({ timeout: STEP_TIMEOUT_MS }), button.click()]);
        // Away to the issuer and back to the page, which says so and does not sign in again by itself.
        await page.waitForFunction((base) => location.href.startsWith(`${base}/`) && document.body.innerText.includes('You signed out.'),
          { timeout: STEP_TIMEOUT_MS }, BASE);
        step(`back on the page: ${page.url()}`);

        // The refresh token was revoked (RFC 7009), by the page's client, hinted as a refresh token.
        const revoked = issuer.revocations.slice(revocations);
        assert.equal(revoked.length, 1, `one revocation: ${JSON.stringify(revoked)}`);
        assert.deepEqual(revoked[0], {
          path: flavour === 'cognito' ? '/oauth2/revoke' : '/revoke',
          clientId: CLIENT_ID, token: refreshToken, tokenTypeHint: 'refresh_token', revoked: true,
        });
        const refused = await fetch(`${issuer.url}/token`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: CLIENT_ID }),
        });
        assert.equal(refused.status, 400, 'the revoked refresh token gives nothing');
        assert.equal((await refused.json()).error, 'invalid_grant');

        // The issuer's session was ended, and the browser sent back to the page.
        const ended = issuer.endSessionRequests.slice(ends);
        assert.equal(ended.length, 1, `one end-session request: ${JSON.stringify(ended)}`);
        if (flavour === 'cognito') {
          assert.deepEqual(ended[0], { path: '/logout', clientId: CLIENT_ID, postLogoutRedirectUri: `${BASE}/`, endedSession: true });
        } else {
          assert.deepEqual(ended[0], {
            path: '/end-session', clientId: CLIENT_ID, idTokenHint: idToken, sub: username,
            postLogoutRedirectUri: `${BASE}/`, state: undefined, endedSession: true,
          });
        }
        // Revoked before the page left for the end of the session.
        const revokeAt = seen.issuerUrls.find((r) => /\/revoke$/.test(new URL(r.url).pathname))?.at;
        const endAt = seen.issuerUrls.find((r) => /\/(end-session|logout)$/.test(new URL(r.url).pathname))?.at;
        assert.ok(revokeAt && endAt && revokeAt <= endAt, 'the revocation came first');

        // Signed out here too: a sign-in button, no question box, no sign-in form asked for, nothing kept.
        await new Promise((r) => setTimeout(r, 1000));
        assert.equal(issuer.counts.forms, forms, 'the page did not go back to the sign-in form by itself');
        assert.ok(page.url().startsWith(`${BASE}/`));
        assert.equal(new URL(page.url()).search, '', 'the address is the page\'s own');
        assert.ok((await shown(page)).signInButton, 'the page offers to sign in');
        assert.ok(await page.$eval('#question', (q) => q.disabled), 'the question box is off');
        assert.deepEqual(await tokensKept(page), []);
        clean(seen);
      } finally {
        await context.close();
        issuer.configure({ flavour: 'oidc' });
      }
    });
  }

  test('without a refresh token the page renews silently with prompt=none before the token expires', { timeout: 4 * STEP_TIMEOUT_MS }, async () => {
    const lifetime = 30;
    issuer.configure({ flavour: 'oidc', refreshTokens: false, tokenLifetimeSeconds: lifetime });
    const refreshTokens = issuer.issuedRefreshTokens.length;
    const { context, page, seen } = await signedIn('erin', 'A question before the token is renewed?');
    try {
      assert.equal(issuer.issuedRefreshTokens.length, refreshTokens, 'the issuer gave no refresh token');
      const first = issuer.issued.filter((t) => t.kind === 'id' && t.sub === 'erin').at(-1);
      const forms = issuer.counts.forms;
      const signIns = issuer.counts.signIns;
      const silent = issuer.counts.silentSignIns;
      const codes = issuer.counts.grants.authorization_code;
      const navigations = seen.navigations.length;
      // Anything the page shows of a sign-in from now on: a sign-in button or a notice.
      await page.evaluate(() => {
        window.__signInShown = [];
        new MutationObserver(() => {
          const account = document.getElementById('account').innerText;
          const notice = document.getElementById('notice').innerText;
          if (/sign in/i.test(account) || notice) window.__signInShown.push({ account, notice });
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      step(`waiting for the silent renewal before ${new Date(first.exp * 1000).toISOString()}`);
      await until(() => issuer.counts.grants.authorization_code > codes, 'the page renews silently', (lifetime + 15) * 1000);
      const renewed = issuer.issued.filter((t) => t.kind === 'id' && t.sub === 'erin').at(-1);
      assert.ok(renewed.silent, 'the new token came from a prompt=none authorization');
      assert.ok(Date.now() < first.exp * 1000, 'renewed before the first token expired');
      assert.equal(issuer.counts.silentSignIns, silent + 1);
      assert.equal(issuer.counts.signIns, signIns, 'no sign-in through the form');
      assert.equal(issuer.counts.forms, forms, 'no sign-in form shown');
      // The request: in a frame, with prompt=none and the current ID token as the hint, code + PKCE as ever.
      const request = seen.issuerUrls.filter((r) => new URL(r.url).searchParams.get('prompt') === 'none');
      assert.equal(request.length, 1, JSON.stringify(request));
      assert.equal(request[0].frame, 'sub', 'asked in a frame, not by the page itself');
      const params = new URL(request[0].url).searchParams;
      assert.equal(params.get('response_type'), 'code');
      assert.equal(params.get('code_challenge_method'), 'S256');
      assert.equal(params.get('redirect_uri'), `${BASE}/`);
      assert.equal(params.get('id_token_hint'), first.token);
      // Without a word: the page never left, showed no sign-in, and its address stayed its own.
      assert.deepEqual(seen.navigations.slice(navigations), [], 'the page itself went nowhere');
      assert.deepEqual(await page.evaluate(() => window.__signInShown), [], 'nothing about signing in was shown');
      assert.equal(page.url(), `${BASE}/`);
      assert.equal(await page.$$eval('iframe', (f) => f.length), 0, 'the frame is gone');

      // The next question carries the renewed token.
      const callsBefore = seen.api.length;
      await ask(page, 'And a question after the silent renewal?');
      const later = seen.api.slice(callsBefore);
      assert.ok(later.length > 0);
      for (const c of later) {
        const t = issuer.issued.find((i) => i.token === bearer(c));
        assert.ok(t?.silent, `${c.method} ${c.url} carries the silently renewed token`);
        assert.equal(t.sub, 'erin');
      }
      assert.deepEqual(await tokensKept(page), []);
      clean(seen);
    } finally {
      await context.close();
      issuer.configure({ refreshTokens: true, tokenLifetimeSeconds: LIFETIME });
    }
  });

  test('a question sent after the sign-in ended is kept across a new sign-in and sent then', { timeout: 5 * STEP_TIMEOUT_MS }, async () => {
    const lifetime = 30;
    issuer.configure({ flavour: 'oidc', refreshTokens: false, tokenLifetimeSeconds: lifetime });
    const before = 'The first question of this chat, asked while signed in?';
    const { context, page, seen } = await signedIn('frank', before);
    try {
      // The chat the first question started, as the history list marks it.
      const chatId = await (await page.waitForSelector('#history-list li.current[data-id]')).evaluate((li) => li.dataset.id);
      // The issuer's session ends (as when it times out): the silent renewal is answered login_required.
      issuer.endSessions();
      const refused = issuer.counts.refused.login_required ?? 0;
      const navigations = seen.navigations.length;
      step('waiting for the renewal to fail');
      await until(() => (issuer.counts.refused.login_required ?? 0) > refused, 'the silent renewal is refused', (lifetime + 15) * 1000);
      await page.waitForFunction(() => /sign in again/i.test(document.getElementById('notice').innerText), { timeout: STEP_TIMEOUT_MS });
      const state = await shown(page);
      assert.ok(state.signInButton, `the page offers to sign in: ${JSON.stringify(state)}`);
      assert.match(state.account, /signed out/i);
      // Nothing lost: the page stayed, with the conversation, and the question box still takes a question.
      assert.deepEqual(seen.navigations.slice(navigations), [], 'the page itself went nowhere');
      assert.ok((await page.evaluate(() => document.getElementById('log').innerText)).includes(`Echo: ${before}`));

      const question = 'This question was typed after the sign-in had ended: is it still sent?';
      const box = await questionBox(page);
      await box.click();
      await box.type(question);
      step('sending while signed out');
      await Promise.all([page.waitForNavigation({ timeout: STEP_TIMEOUT_MS }), page.keyboard.press('Enter')]);
      step(`at ${page.url()}`);
      await signInOnIssuer(page, 'frank');

      // Back and signed in: the question is sent by itself, in the same chat, and answered.
      await page.waitForFunction((expected) => document.body.innerText.includes(expected), { timeout: STEP_TIMEOUT_MS }, `Echo: ${question}`);
      const sent = seen.api.filter((c) => c.method === 'POST' && /\/chat\/stream$/.test(c.url)).at(-1);
      const body = JSON.parse(sent.body);
      assert.equal(body.messages.at(-1).content, question);
      const after = issuer.issued.find((t) => t.token === bearer(sent));
      assert.equal(after?.sub, 'frank');
      assert.ok(!after.silent, 'sent with the token of the new sign-in');
      assert.equal(body.sessionState, chatId, 'in the chat it was asked in');
      const log = await page.evaluate(() => document.getElementById('log').innerText);
      assert.ok(log.includes(`Echo: ${before}`), 'the chat is shown again, with its earlier turn');
      assert.equal(log.split(question).length - 1, 2, 'the question once, and its answer');
      assert.equal(await page.evaluate(() => Object.keys(sessionStorage).length), 0, 'nothing is kept any more');
      assert.deepEqual(await tokensKept(page), []);
      clean(seen);
    } finally {
      await context.close();
      issuer.configure({ refreshTokens: true, tokenLifetimeSeconds: LIFETIME });
    }
  });
});
