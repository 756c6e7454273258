// The local OpenID Connect issuer (oidc-issuer.mjs) driven as a browser would drive it, from node: discovery, the
// sign-in form, the code exchange with PKCE and what it refuses, refresh with rotation, CORS for the page's origin,
// tokens that verify with the published key, prompt=none against the browser's session at the issuer, revocation,
// RP-initiated logout, Cognito's shape and an issuer that gives no refresh token. Then, when a local run in JWT mode is given, that the backend accepts
// the issuer's tokens and takes the caller from them:
//
//   node --test tests/browser/oidc-issuer.test.mjs                      the issuer alone
//   CHAT_AUTH=jwt CHAT_BASE_URL=http://127.0.0.1:9080 OIDC_PORT=9081 OIDC_CLIENT_ID=chat-page \
//     node --test tests/browser/oidc-issuer.test.mjs                    and the backend: a local run with
//       AUTH_MODE=jwt JWT_ISSUER=http://127.0.0.1:9081 JWT_AUDIENCE=chat-page JWKS_URL=http://127.0.0.1:9081/jwks
//
// OIDC_KEY_FILE: the issuer's signing key (made there if missing), shared with page-jwt.test.mjs against one backend.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { start } from './oidc-issuer.mjs';

const CLIENT_ID = process.env.OIDC_CLIENT_ID ?? 'chat-page';
// The backend, only when it is said to be in JWT mode (the ChatUI browser runs set CHAT_BASE_URL to one that is not).
const BACKEND = process.env.CHAT_AUTH === 'jwt' ? (process.env.CHAT_BASE_URL ?? 'http://127.0.0.1:9080').replace(/\/+$/, '') : undefined;
const PORT = BACKEND ? Number(process.env.OIDC_PORT ?? 9081) : 0;
const REDIRECT = BACKEND ? `${BACKEND}/` : 'http://127.0.0.1:9080/';
const PAGE_ORIGIN = new URL(REDIRECT).origin;
const LIFETIME = 60;

const b64url = (data) => Buffer.from(data).toString('base64url');
const pkce = () => {
  const verifier = b64url(crypto.randomBytes(32));
  return { verifier, challenge: b64url(crypto.createHash('sha256').update(verifier).digest()) };
};

let issuer;

function authorizeUrl(params = {}) {
  const url = new URL(`${issuer.url}/authorize`);
  const defaults = {
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT,
    scope: 'openid email',
    state: 'state-' + b64url(crypto.randomBytes(8)),
    nonce: 'nonce-' + b64url(crypto.randomBytes(8)),
    code_challenge_method: 'S256',
  };
  for (const [k, v] of Object.entries({ ...defaults, ...params })) if (v !== undefined) url.searchParams.set(k, v);
  return url;
}

// The form's hidden fields, read from its HTML.
function hiddenFields(html) {
  const fields = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    fields.append(decodeHtml(m[1]), decodeHtml(m[2]));
  }
  return fields;
}
const decodeHtml = (s) => s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));

// Signs in through the form as `username`: the redirect's parameters (code, state, iss) and what was sent.
async function signIn(username, params = {}) {
  const { verifier, challenge } = pkce();
  const url = authorizeUrl({ code_challenge: challenge, ...params });
  const page = await fetch(url, { redirect: 'manual' });
  assert.equal(page.status, 200, `the sign-in form: ${url}`);
  const fields = hiddenFields(await page.text());
  fields.set('username', username);
  const back = await fetch(`${issuer.url}/authorize`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: fields,
  });
  assert.equal(back.status, 302, 'the form redirects back');
  const location = new URL(back.headers.get('location'));
  // The browser's session at the issuer: its cookie, as a browser would send it back.
  const cookie = (back.headers.get('set-cookie') ?? '').split(';')[0];
  return { location, verifier, challenge, cookie, state: url.searchParams.get('state'), nonce: url.searchParams.get('nonce') };
}

async function token(form, { origin } = {}) {
  const res = await fetch(`${issuer.url}/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...(origin ? { Origin: origin } : {}) },
    body: new URLSearchParams(form),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

const exchange = (code, verifier, extra = {}) =>
  token({ grant_type: 'authorization_code', client_id: CLIENT_ID, code, redirect_uri: REDIRECT, code_verifier: verifier, ...extra });

// A JWT's header and claims, after checking its signature with the issuer's published keys.
async function verified(jwt) {
  const [h, c, s] = jwt.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  const { keys } = await (await fetch(`${issuer.url}/jwks`)).json();
  const jwk = keys.find((k) => k.kid === header.kid);
  assert.ok(jwk, `the token's kid ${header.kid} is in the JWKS`);
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  assert.ok(crypto.verify('sha256', Buffer.from(`${h}.${c}`), key, Buffer.from(s, 'base64url')), 'the signature verifies');
  return { header, claims: JSON.parse(Buffer.from(c, 'base64url')) };
}

describe('the local OpenID Connect issuer', () => {
  before(async () => {
    issuer = await start({
      port: PORT,
      clientId: CLIENT_ID,
      redirectUris: [REDIRECT],
      tokenLifetimeSeconds: LIFETIME,
      keyFile: process.env.OIDC_KEY_FILE,
    });
  });
  after(() => issuer?.close());

  test('discovery names its endpoints, code flow with S256 only, and a public client', async () => {
    const res = await fetch(`${issuer.url}/.well-known/openid-configuration`, { headers: { Origin: PAGE_ORIGIN } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE_ORIGIN);
    const d = await res.json();
    assert.equal(d.issuer, issuer.url);
    assert.equal(d.authorization_endpoint, `${issuer.url}/authorize`);
    assert.equal(d.token_endpoint, `${issuer.url}/token`);
    assert.equal(d.jwks_uri, `${issuer.url}/jwks`);
    assert.deepEqual(d.response_types_supported, ['code']);
    assert.deepEqual(d.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(d.token_endpoint_auth_methods_supported, ['none']);
    assert.ok(d.grant_types_supported.includes('refresh_token'));
    assert.equal(d.revocation_endpoint, `${issuer.url}/revoke`);
    assert.equal(d.end_session_endpoint, `${issuer.url}/end-session`);
    const { keys } = await (await fetch(d.jwks_uri)).json();
    assert.equal(keys.length, 1);
    assert.deepEqual([keys[0].kty, keys[0].alg, keys[0].use, typeof keys[0].kid], ['RSA', 'RS256', 'sig', 'string']);
    assert.ok(!('d' in keys[0]), 'no private part published');
  });

  test('the sign-in form has a labelled username field and a button, and carries the request', async () => {
    const url = authorizeUrl({ code_challenge: pkce().challenge });
    const res = await fetch(url, { redirect: 'manual' });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/html/);
    assert.match(res.headers.get('content-security-policy'), new RegExp(`form-action 'self' ${PAGE_ORIGIN}`));
    const html = await res.text();
    assert.match(html, /<label for="username">Username<\/label>/);
    assert.match(html, /<input id="username" name="username"/);
    assert.match(html, /<button type="submit">Sign in<\/button>/);
    const fields = hiddenFields(html);
    for (const name of ['client_id', 'redirect_uri', 'state', 'nonce', 'code_challenge', 'code_challenge_method']) {
      assert.equal(fields.get(name), url.searchParams.get(name), name);
    }
    // A value is escaped, never markup.
    const evil = await (await fetch(authorizeUrl({ code_challenge: pkce().challenge, state: '"><script>x</script>' }))).text();
    assert.ok(!evil.includes('<script>'), 'the state is escaped in the form');
  });

  test('a bad client or redirect URI is shown, never redirected to; other errors go back with the state', async () => {
    const { challenge } = pkce();
    for (const params of [{ client_id: 'someone-else' }, { redirect_uri: `${REDIRECT}other` }, { redirect_uri: 'https://evil.test/' }]) {
      const res = await fetch(authorizeUrl({ code_challenge: challenge, ...params }), { redirect: 'manual' });
      assert.equal(res.status, 400, JSON.stringify(params));
      assert.equal(res.headers.get('location'), null);
    }
    const cases = [
      [{ code_challenge: undefined }, 'invalid_request', /code_challenge is required/],
      [{ code_challenge: challenge, code_challenge_method: 'plain' }, 'invalid_request', /S256/],
      [{ code_challenge: challenge, code_challenge_method: undefined }, 'invalid_request', /S256/],
      [{ code_challenge: 'short' }, 'invalid_request', /not an S256 challenge/],
      [{ code_challenge: challenge, response_type: 'token' }, 'unsupported_response_type', /code/],
      [{ code_challenge: challenge, scope: 'email' }, 'invalid_scope', /openid/],
      [{ code_challenge: challenge, prompt: 'none' }, 'login_required', /sign in/],
    ];
    for (const [params, error, description] of cases) {
      const url = authorizeUrl(params);
      const res = await fetch(url, { redirect: 'manual' });
      assert.equal(res.status, 302, JSON.stringify(params));
      const back = new URL(res.headers.get('location'));
      assert.equal(`${back.origin}${back.pathname}`, REDIRECT);
      assert.equal(back.searchParams.get('error'), error, JSON.stringify(params));
      assert.match(back.searchParams.get('error_description'), description);
      assert.equal(back.searchParams.get('state'), url.searchParams.get('state'), 'the state is echoed');
      assert.equal(back.searchParams.get('code'), null);
    }
  });

  test('sign-in redirects back with a code, the state and the issuer; the code and its verifier give tokens', async () => {
    const before = issuer.counts.grants.authorization_code;
    const { location, verifier, state, nonce } = await signIn('alice');
    assert.equal(`${location.origin}${location.pathname}`, REDIRECT);
    assert.equal(location.searchParams.get('state'), state);
    assert.equal(location.searchParams.get('iss'), issuer.url);
    const code = location.searchParams.get('code');
    assert.ok(code && code.length >= 32);

    const t0 = Math.floor(Date.now() / 1000);
    const res = await exchange(code, verifier);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.body.token_type, 'Bearer');
    assert.equal(res.body.expires_in, LIFETIME);
    assert.equal(typeof res.body.refresh_token, 'string');
    assert.equal(issuer.counts.grants.authorization_code, before + 1);

    const id = await verified(res.body.id_token);
    assert.deepEqual([id.header.alg, id.header.kid, 'crit' in id.header], ['RS256', issuer.kid, false]);
    assert.equal(id.claims.iss, issuer.url);
    assert.equal(id.claims.sub, 'alice');
    assert.equal(id.claims.aud, CLIENT_ID);
    assert.equal(id.claims.nonce, nonce, 'the nonce is echoed in the ID token');
    assert.ok(Math.abs(id.claims.iat - t0) <= 2);
    assert.equal(id.claims.exp - id.claims.iat, LIFETIME);

    const access = await verified(res.body.access_token);
    assert.equal(access.header.typ, 'at+jwt');
    assert.deepEqual([access.claims.iss, access.claims.sub, access.claims.aud, access.claims.client_id], [issuer.url, 'alice', CLIENT_ID, CLIENT_ID]);
    assert.equal(access.claims.exp - access.claims.iat, LIFETIME);
    const info = await fetch(`${issuer.url}/userinfo`, { headers: { Authorization: `Bearer ${res.body.access_token}` } });
    assert.equal(info.status, 200);
    assert.equal((await info.json()).sub, 'alice');
  });

  test('the token endpoint answers CORS for the page origin only', async () => {
    const { location, verifier } = await signIn('alice');
    const res = await token(
      { grant_type: 'authorization_code', client_id: CLIENT_ID, code: location.searchParams.get('code'), redirect_uri: REDIRECT, code_verifier: verifier },
      { origin: PAGE_ORIGIN },
    );
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE_ORIGIN);
    const other = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: 'x' }, { origin: 'http://evil.test' });
    assert.equal(other.headers.get('access-control-allow-origin'), null);
    const preflight = await fetch(`${issuer.url}/token`, {
      method: 'OPTIONS',
      headers: { Origin: PAGE_ORIGIN, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type' },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), PAGE_ORIGIN);
  });

  test('a wrong verifier is refused, and uses the code up', async () => {
    const { location, verifier } = await signIn('alice');
    const code = location.searchParams.get('code');
    for (const wrong of [pkce().verifier, '', 'too-short']) {
      const { location: l2 } = await signIn('alice');
      const res = await exchange(l2.searchParams.get('code'), wrong);
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'invalid_grant', JSON.stringify(res.body));
    }
    const first = await exchange(code, pkce().verifier);
    assert.deepEqual([first.status, first.body.error], [400, 'invalid_grant']);
    assert.match(first.body.error_description, /does not match/);
    const again = await exchange(code, verifier);
    assert.deepEqual([again.status, again.body.error], [400, 'invalid_grant'], 'the right verifier after a wrong one');
  });

  test('a code works once: used again it is refused and the tokens it gave cannot be refreshed', async () => {
    const { location, verifier } = await signIn('alice');
    const code = location.searchParams.get('code');
    const first = await exchange(code, verifier);
    assert.equal(first.status, 200);
    const second = await exchange(code, verifier);
    assert.deepEqual([second.status, second.body.error], [400, 'invalid_grant']);
    assert.match(second.body.error_description, /used already/);
    const refresh = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: first.body.refresh_token });
    assert.deepEqual([refresh.status, refresh.body.error], [400, 'invalid_grant']);
  });

  test('the exchange must name the same redirect URI and client, and no secret', async () => {
    for (const extra of [{ redirect_uri: `${REDIRECT}x` }, { redirect_uri: undefined }]) {
      const { location, verifier } = await signIn('alice');
      const form = { grant_type: 'authorization_code', client_id: CLIENT_ID, code: location.searchParams.get('code'), redirect_uri: REDIRECT, code_verifier: verifier, ...extra };
      if (extra.redirect_uri === undefined) delete form.redirect_uri;
      const res = await token(form);
      assert.deepEqual([res.status, res.body.error], [400, 'invalid_grant'], JSON.stringify(extra));
    }
    for (const extra of [{ client_id: 'someone-else' }, { client_secret: 'x' }]) {
      const { location, verifier } = await signIn('alice');
      const res = await exchange(location.searchParams.get('code'), verifier, extra);
      assert.deepEqual([res.status, res.body.error], [401, 'invalid_client'], JSON.stringify(extra));
    }
    const unknown = await token({ grant_type: 'password', client_id: CLIENT_ID, username: 'alice', password: 'x' });
    assert.deepEqual([unknown.status, unknown.body.error], [400, 'unsupported_grant_type']);
  });

  test('refresh gives new tokens for the same user and rotates the refresh token; a replay revokes the line', async () => {
    const { location, verifier } = await signIn('alice');
    const first = await exchange(location.searchParams.get('code'), verifier);
    const before = issuer.counts.grants.refresh_token;
    const refreshed = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: first.body.refresh_token });
    assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
    assert.equal(issuer.counts.grants.refresh_token, before + 1);
    assert.notEqual(refreshed.body.refresh_token, first.body.refresh_token);
    const old = (await verified(first.body.id_token)).claims;
    const renewed = (await verified(refreshed.body.id_token)).claims;
    assert.deepEqual([renewed.iss, renewed.sub, renewed.aud, renewed.auth_time], [old.iss, old.sub, old.aud, old.auth_time]);
    assert.equal(renewed.nonce, undefined, 'a refreshed ID token has no nonce (as Cognito)');
    assert.equal(renewed.exp - renewed.iat, LIFETIME);

    const replay = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: first.body.refresh_token });
    assert.deepEqual([replay.status, replay.body.error], [400, 'invalid_grant']);
    const next = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: refreshed.body.refresh_token });
    assert.deepEqual([next.status, next.body.error], [400, 'invalid_grant'], 'the replay revoked the newer refresh token too');
  });

  test('prompt=none: a code at once while the browser has a session, login_required without one or for another user', async () => {
    const { cookie, verifier: v1, location: l1 } = await signIn('alice');
    assert.match(cookie, /^oidc_session=[\w-]{43}$/, 'the sign-in starts a session');
    const aliceIdToken = (await exchange(l1.searchParams.get('code'), v1)).body.id_token;
    const { verifier, challenge } = pkce();
    const forms = issuer.counts.forms;
    const silent = issuer.counts.silentSignIns;
    const url = authorizeUrl({ code_challenge: challenge, prompt: 'none', id_token_hint: aliceIdToken });
    const res = await fetch(url, { redirect: 'manual', headers: { Cookie: cookie } });
    assert.equal(res.status, 302);
    const back = new URL(res.headers.get('location'));
    assert.equal(back.searchParams.get('state'), url.searchParams.get('state'));
    assert.equal(back.searchParams.get('error'), null);
    assert.equal(issuer.counts.forms, forms, 'no form');
    assert.equal(issuer.counts.silentSignIns, silent + 1);
    const tokens = await exchange(back.searchParams.get('code'), verifier);
    assert.equal(tokens.status, 200);
    const id = (await verified(tokens.body.id_token)).claims;
    assert.deepEqual([id.sub, id.nonce], ['alice', url.searchParams.get('nonce')]);
    assert.equal(issuer.issued.find((t) => t.token === tokens.body.id_token).silent, true);

    // Without the cookie, or hinting at another user (bob signed in elsewhere), no code.
    const bob = await signIn('bob');
    const bobIdToken = (await exchange(bob.location.searchParams.get('code'), bob.verifier)).body.id_token;
    for (const [headers, hint] of [[{}, aliceIdToken], [{ Cookie: cookie }, bobIdToken], [{ Cookie: 'oidc_session=forged' }, undefined]]) {
      const refused = await fetch(authorizeUrl({ code_challenge: challenge, prompt: 'none', id_token_hint: hint }), { redirect: 'manual', headers });
      assert.equal(refused.status, 302);
      const to = new URL(refused.headers.get('location'));
      assert.deepEqual([to.searchParams.get('error'), to.searchParams.get('code')], ['login_required', null], JSON.stringify(headers));
    }
  });

  test('revocation (RFC 7009): the refresh token and its line stop working; unknown tokens are 200; a client must name itself', async () => {
    const { location, verifier } = await signIn('alice');
    const tokens = (await exchange(location.searchParams.get('code'), verifier)).body;
    const revoke = (form, headers = {}) => fetch(`${issuer.url}/revoke`, {
      method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: PAGE_ORIGIN, ...headers }, body: new URLSearchParams(form),
    });
    const before = issuer.revocations.length;
    const res = await revoke({ token: tokens.refresh_token, token_type_hint: 'refresh_token', client_id: CLIENT_ID });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE_ORIGIN);
    assert.deepEqual(issuer.revocations.slice(before), [
      { path: '/revoke', clientId: CLIENT_ID, token: tokens.refresh_token, tokenTypeHint: 'refresh_token', revoked: true },
    ]);
    const refresh = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: tokens.refresh_token });
    assert.deepEqual([refresh.status, refresh.body.error], [400, 'invalid_grant']);
    assert.equal((await revoke({ token: 'not-a-token', client_id: CLIENT_ID })).status, 200);
    assert.equal(issuer.revocations.at(-1).revoked, false);
    assert.equal((await revoke({ token: tokens.refresh_token })).status, 401, 'no client_id');
    assert.equal((await revoke({ token: tokens.refresh_token, client_id: 'someone-else' })).status, 401);
    assert.equal((await revoke({ client_id: CLIENT_ID })).status, 400, 'no token');
  });

  test('end-session ends the browser session and redirects to a registered address only', async () => {
    const { cookie, location, verifier } = await signIn('alice');
    const idToken = (await exchange(location.searchParams.get('code'), verifier)).body.id_token;
    const end = (params, headers = {}) => {
      const url = new URL(`${issuer.url}/end-session`);
      for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
      return fetch(url, { redirect: 'manual', headers });
    };
    // Refused: an address not registered, a hint that is not an ID token from here, a redirect with neither a hint
    // nor a client id.
    for (const params of [
      { id_token_hint: idToken, post_logout_redirect_uri: 'https://evil.test/' },
      { id_token_hint: `${idToken.slice(0, -4)}AAAA`, post_logout_redirect_uri: REDIRECT },
      { post_logout_redirect_uri: REDIRECT },
    ]) {
      const res = await end(params, { Cookie: cookie });
      assert.equal(res.status, 400, JSON.stringify(params));
      assert.equal(res.headers.get('location'), null);
    }
    const before = issuer.endSessionRequests.length;
    const res = await end({ id_token_hint: idToken, post_logout_redirect_uri: REDIRECT, client_id: CLIENT_ID, state: 's1' }, { Cookie: cookie });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), `${REDIRECT}?state=s1`);
    assert.match(res.headers.get('set-cookie'), /^oidc_session=;.*Max-Age=0/);
    assert.deepEqual(issuer.endSessionRequests.slice(before), [{
      path: '/end-session', clientId: CLIENT_ID, idTokenHint: idToken, sub: 'alice', postLogoutRedirectUri: REDIRECT,
      state: 's1', endedSession: true,
    }]);
    // The session is over: prompt=none is refused with the old cookie.
    const after = await fetch(authorizeUrl({ code_challenge: pkce().challenge, prompt: 'none' }), { redirect: 'manual', headers: { Cookie: cookie } });
    assert.equal(new URL(after.headers.get('location')).searchParams.get('error'), 'login_required');
  });

  test("Cognito's shape, and an issuer that gives no refresh token", async () => {
    issuer.configure({ flavour: 'cognito', refreshTokens: false });
    try {
      const d = await (await fetch(`${issuer.url}/.well-known/openid-configuration`)).json();
      assert.equal(d.authorization_endpoint, `${issuer.url}/oauth2/authorize`);
      assert.equal(d.token_endpoint, `${issuer.url}/oauth2/token`);
      assert.equal(d.revocation_endpoint, undefined);
      assert.equal(d.end_session_endpoint, undefined);
      assert.deepEqual(d.grant_types_supported, ['authorization_code']);
      const { location, verifier, cookie } = await signIn('alice');
      const res = await fetch(`${issuer.url}/oauth2/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'authorization_code', client_id: CLIENT_ID, code: location.searchParams.get('code'), redirect_uri: REDIRECT, code_verifier: verifier }),
      });
      const body = await res.json();
      assert.equal(res.status, 200);
      assert.equal(body.refresh_token, undefined, 'no refresh token');
      assert.equal(typeof body.id_token, 'string');
      const logout = (params) => fetch(`${issuer.url}/logout?${new URLSearchParams(params)}`, { redirect: 'manual', headers: { Cookie: cookie } });
      assert.equal((await logout({ client_id: CLIENT_ID, logout_uri: 'https://evil.test/' })).status, 400);
      assert.equal((await logout({ client_id: 'someone-else', logout_uri: REDIRECT })).status, 400);
      const before = issuer.endSessionRequests.length;
      const out = await logout({ client_id: CLIENT_ID, logout_uri: REDIRECT });
      assert.equal(out.status, 302);
      assert.equal(out.headers.get('location'), REDIRECT);
      assert.deepEqual(issuer.endSessionRequests.slice(before), [{ path: '/logout', clientId: CLIENT_ID, postLogoutRedirectUri: REDIRECT, endedSession: true }]);
    } finally {
      issuer.configure({ flavour: 'oidc', refreshTokens: true });
    }
  });

  describe('the backend accepts its tokens', { skip: BACKEND ? false : 'set CHAT_AUTH=jwt and CHAT_BASE_URL to a local run in JWT mode' }, () => {
    async function tokensFor(user) {
      const { location, verifier } = await signIn(user);
      const res = await exchange(location.searchParams.get('code'), verifier);
      assert.equal(res.status, 200);
      return res.body;
    }
    const chat = (bearer, content) =>
      fetch(`${BACKEND}/chat`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}) },
        body: JSON.stringify({ messages: [{ role: 'user', content }] }),
        signal: AbortSignal.timeout(120000),
      });
    const history = async (bearer) => {
      const res = await fetch(`${BACKEND}/chat-history?mode=standard&limit=100`, { headers: { Authorization: `Bearer ${bearer}` } });
      assert.equal(res.status, 200);
      return res.json();
    };

    test("a chat with alice's ID token is alice's; bob's does not see it", async () => {
      const alice = await tokensFor('alice');
      const question = `oidc ${b64url(crypto.randomBytes(6))}`;
      const res = await chat(alice.id_token, question);
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.ok(body.message.content.includes(question), body.message.content);
      const id = body.sessionState;
      assert.ok((await history(alice.id_token)).some((c) => c.id === id), "the chat is in alice's history");
      const bob = await tokensFor('bob');
      assert.ok(!(await history(bob.id_token)).some((c) => c.id === id), "the chat is not in bob's");
      // Alice's access token (aud is the client id too) is alice as well.
      assert.ok((await history(alice.access_token)).some((c) => c.id === id), 'the access token is alice too');
      // A refreshed token is still alice.
      const refreshed = await token({ grant_type: 'refresh_token', client_id: CLIENT_ID, refresh_token: alice.refresh_token });
      assert.ok((await history(refreshed.body.id_token)).some((c) => c.id === id), 'a refreshed token is alice');
    });

    test('no token, a forged one, another audience or issuer, an expired one or a crit header is a 401', async () => {
      assert.equal((await chat(undefined, 'no token')).status, 401);
      const alice = await tokensFor('alice');
      const [h, c, sig] = alice.id_token.split('.');
      const claims = JSON.parse(Buffer.from(c, 'base64url'));
      // Claims changed under the issuer's signature.
      assert.equal((await chat(`${h}.${b64url(JSON.stringify({ ...claims, sub: 'mallory' }))}.${sig}`, 'forged')).status, 401);
      // Signed by another key under the issuer's kid.
      const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
      const otherKey = `${h}.${c}.${b64url(crypto.sign('sha256', Buffer.from(`${h}.${c}`), privateKey))}`;
      assert.equal((await chat(otherKey, 'other key')).status, 401);
      // Signed by the issuer's key, with one thing wrong each; the same token without it is accepted.
      const header = { alg: 'RS256', typ: 'JWT', kid: issuer.kid };
      const now = Math.floor(Date.now() / 1000);
      const good = { ...claims, iat: now, exp: now + 60 };
      assert.equal((await chat(issuer.sign(header, good), 'signed here')).status, 200, 'the control token is accepted');
      for (const [what, hdr, body] of [
        ['another audience', header, { ...good, aud: 'another-client' }],
        ['another issuer', header, { ...good, iss: 'http://127.0.0.1:1' }],
        ['expired past the skew', header, { ...good, iat: now - 600, exp: now - 120 }],
        ['a crit header', { ...header, crit: ['exp'] }, good],
        ['no kid naming the key', { ...header, kid: 'unknown' }, good],
      ]) {
        assert.equal((await chat(issuer.sign(hdr, body), what)).status, 401, what);
      }
    });
  });
});
