// A small OpenID Connect issuer for tests: the authorization code flow with PKCE for one public client, as the
// backend's page signs in with it (Cognito, Entra ID, Auth0 or Keycloak in a deployment). Node's own http and crypto
// only, so it needs nothing installed.
//
//   /.well-known/openid-configuration   discovery (OpenID Connect Discovery 1.0)
//   /authorize                          response_type=code, the registered client_id and an exactly registered
//                                       redirect_uri, code_challenge with method S256 required, `openid` in scope;
//                                       a sign-in form (a username and a button), then a redirect back with
//                                       `code`, `state` (echoed) and `iss` (RFC 9207); a sign-in starts the
//                                       browser's session at the issuer (a cookie). `prompt=none` shows nothing: a
//                                       code at once while that session lives (and is the id_token_hint's user),
//                                       else `login_required`
//   /token                              authorization_code (the code once, within 60 s, for the same client and
//                                       redirect_uri, its code_verifier matching the challenge) and refresh_token
//                                       (rotated: each refresh token works once; using one again revokes its line)
//   /revoke                             RFC 7009 token revocation for the public client (client_id, token,
//                                       token_type_hint): a refresh token's line stops working; always 200
//   /end-session                        RP-initiated logout 1.0: id_token_hint, client_id, post_logout_redirect_uri
//                                       (registered) and state; ends the browser's session, then redirects back
//   /jwks                               the signing key made at start (RS256, with kid, alg and use: sig)
//   /userinfo                           the claims, for an access token
//
// Cognito's shape (`flavour: 'cognito'`): discovery names /oauth2/authorize, /oauth2/token and /oauth2/userInfo and
// neither a revocation nor an end-session endpoint, as a user pool's does; its hosted UI's /oauth2/revoke (as /revoke)
// and /logout (client_id and a registered logout_uri: ends the session, redirects there) are served. Both shapes
// serve every path. `refreshTokens: false` issues no refresh token (as a provider does for `openid email` by default),
// so that a client must renew with `prompt=none`. Revocations and end-session requests are recorded for tests.
//
// Tokens are JWTs signed RS256 with `kid`: the ID token has iss, sub (the username), aud (the client id), azp, nonce
// (as sent; a refreshed ID token has none, as Cognito's), iat, auth_time, exp and email; the access token (RFC 9068,
// typ at+jwt) has iss, sub, aud (`audience`, by default the client id), client_id, scope, jti, iat and exp. Both
// last `tokenLifetimeSeconds`, so that a client's renewal can be tested. The backend verifies either
// (README, "Identity": the algorithm is the key's, the token names the key's kid, no `crit`).
//
// As a module:  const issuer = await start({ port, clientId, redirectUris, tokenLifetimeSeconds, refreshTokens,
//                                             flavour, postLogoutRedirectUris });
//               issuer.url, issuer.counts, issuer.issued (JWTs), issuer.issuedRefreshTokens, issuer.revocations,
//               issuer.endSessionRequests, issuer.configure({ tokenLifetimeSeconds, refreshTokens, flavour }) (for
//               what is asked from then on), issuer.endSessions() (every browser session ends, as when they time
//               out), await issuer.close()
//               (`keyFile`: the signing key is read from there, or made and written there, so that issuers started
//               one after the other against one backend sign with the key it already holds)
// From a shell: node tests/browser/oidc-issuer.mjs --port 9081 --client-id page \
//                 --redirect-uri http://127.0.0.1:9080/ [--lifetime 60] [--no-refresh-tokens] [--flavour cognito]
//                 [--exit-with-stdin]
//               prints `oidc-issuer: ready on <url>` and serves until stopped (or its standard input closes).
import fs from 'node:fs';
import http from 'node:http';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const CODE_LIFETIME_MS = 60_000;
const MAX_BODY_BYTES = 64 * 1024;
// RFC 7636 §4.1: a verifier is 43 to 128 unreserved characters; an S256 challenge is 43 base64url characters.
const VERIFIER_RE = /^[A-Za-z0-9\-._~]{43,128}$/;
const CHALLENGE_RE = /^[A-Za-z0-9_-]{43}$/;
const USERNAME_RE = /^[A-Za-z0-9._@-]{1,64}$/;
const SESSION_COOKIE = 'oidc_session';
const FLAVOURS = ['oidc', 'cognito'];

const b64url = (data) => Buffer.from(data).toString('base64url');
const randomToken = () => b64url(crypto.randomBytes(32));
const now = () => Math.floor(Date.now() / 1000);

/** Starts the issuer. `redirectUris`: the exact redirect URIs registered for `clientId`; `allowedOrigins`: the
 * origins /token, /jwks, /userinfo and discovery answer CORS for (by default those of the redirect URIs). */
export async function start({
  port = 0,
  host = '127.0.0.1',
  clientId,
  redirectUris,
  tokenLifetimeSeconds = 60,
  refreshLifetimeSeconds = 3600,
  refreshTokens: issueRefreshTokens = true,
  flavour = 'oidc',
  postLogoutRedirectUris,
  audience,
  allowedOrigins,
  keyFile,
} = {}) {
  if (!clientId) throw new Error('oidc-issuer: clientId is required');
  if (!Array.isArray(redirectUris) || redirectUris.length === 0) {
    throw new Error('oidc-issuer: redirectUris (at least one) is required');
  }
  for (const uri of redirectUris) new URL(uri); // throws on one that is not absolute
  const logoutUris = postLogoutRedirectUris ?? redirectUris;
  // What may change while the issuer runs (configure): it applies to what is asked from then on.
  const settings = { tokenLifetimeSeconds, refreshTokens: issueRefreshTokens, flavour };
  const configure = (changes) => {
    if (changes.flavour !== undefined && !FLAVOURS.includes(changes.flavour)) {
      throw new Error(`oidc-issuer: flavour is one of ${FLAVOURS.join(', ')}`);
    }
    for (const k of Object.keys(settings)) if (changes[k] !== undefined) settings[k] = changes[k];
  };
  configure({ flavour });
  const origins = new Set(allowedOrigins ?? redirectUris.map((u) => new URL(u).origin));
  const accessAudience = audience ?? clientId;

  // The signing key, with the kid of its RFC 7638 thumbprint.
  const privateKey = signingKey(keyFile);
  const publicKey = crypto.createPublicKey(privateKey);
  const { n, e } = publicKey.export({ format: 'jwk' });
  const kid = b64url(crypto.createHash('sha256').update(JSON.stringify({ e, kty: 'RSA', n })).digest());
  const jwks = { keys: [{ kty: 'RSA', n, e, kid, alg: 'RS256', use: 'sig' }] };

  const codes = new Map(); // code -> grant
  const refreshTokens = new Map(); // refresh token -> { line, used, exp, ... }
  const revokedLines = new Set();
  const sessions = new Map(); // the browsers' sessions at the issuer: cookie value -> { sub, authTime }
  // What happened, for tests: grants served, forms shown, sign-ins (through the form, and silent ones with
  // prompt=none), refusals by error code.
  const counts = {
    forms: 0, signIns: 0, silentSignIns: 0, grants: { authorization_code: 0, refresh_token: 0 }, refused: {},
  };
  const issued = []; // every token issued: { kind, token, sub, iat, exp, grant, silent }
  const issuedRefreshTokens = [];
  // Every revocation request: { path, clientId, token, tokenTypeHint, revoked (a refresh token whose line ended) }.
  const revocations = [];
  // Every end-session request: { path, clientId, idTokenHint, sub (the hint's), postLogoutRedirectUri, state,
  // endedSession (the browser had one) }; for Cognito's /logout, postLogoutRedirectUri is its logout_uri.
  const endSessionRequests = [];
  let url;

  function sign(header, claims) {
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    return `${input}.${b64url(crypto.sign('sha256', Buffer.from(input), privateKey))}`;
  }

  function refuse(code) {
    counts.refused[code] = (counts.refused[code] ?? 0) + 1;
  }

  // The claims of a JWT this issuer signed (and that has not been altered), or null.
  function verified(jwt) {
    const [header, payload, signature] = String(jwt ?? '').split('.');
    if (!signature) return null;
    const ok = crypto.verify('sha256', Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'));
    if (!ok) return null;
    try {
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      return claims.iss === url ? claims : null;
    } catch {
      return null;
    }
  }

  // The browser's session at the issuer, from its cookie; undefined without one.
  function sessionOf(req) {
    const id = (req.headers.cookie ?? '').split(';').map((c) => c.trim().split('='))
      .find(([name]) => name === SESSION_COOKIE)?.[1];
    const session = id && sessions.get(id);
    return session ? { id, ...session } : undefined;
  }

  function tokens(grant, kind) {
    const iat = now();
    const exp = iat + settings.tokenLifetimeSeconds;
    const idClaims = {
      iss: url,
      sub: grant.sub,
      aud: clientId,
      azp: clientId,
      iat,
      exp,
      auth_time: grant.authTime,
      email: `${grant.sub}@example.test`,
      email_verified: true,
      ...(kind === 'authorization_code' && grant.nonce !== undefined ? { nonce: grant.nonce } : {}),
    };
    const idToken = sign({ alg: 'RS256', typ: 'JWT', kid }, idClaims);
    const accessToken = sign(
      { alg: 'RS256', typ: 'at+jwt', kid },
      { iss: url, sub: grant.sub, aud: accessAudience, client_id: clientId, scope: grant.scope, jti: randomToken(), iat, exp },
    );
    let refreshToken;
    if (settings.refreshTokens) {
      refreshToken = randomToken();
      refreshTokens.set(refreshToken, { ...grant, used: false, exp: iat + refreshLifetimeSeconds });
      issuedRefreshTokens.push(refreshToken);
    }
    const silent = Boolean(grant.silent);
    issued.push(
      { kind: 'id', token: idToken, sub: grant.sub, iat, exp, grant: kind, silent },
      { kind: 'access', token: accessToken, sub: grant.sub, iat, exp, grant: kind, silent },
    );
    counts.grants[kind] += 1;
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: settings.tokenLifetimeSeconds,
      id_token: idToken,
      ...(refreshToken ? { refresh_token: refreshToken } : {}),
      scope: grant.scope,
    };
  }

  // The authorization request's parameters, checked in RFC 6749 §4.1.2.1's order: a bad client or redirect URI
  // is shown to the user (never a redirect to an unregistered address); anything else goes back to the client.
  function checkAuthorization(p, session) {
    if (p.get('client_id') !== clientId) return { page: 'unknown client_id' };
    const redirectUri = p.get('redirect_uri');
    if (!redirectUris.includes(redirectUri)) return { page: 'redirect_uri is not registered for this client' };
    const back = (error, description) => ({ redirectUri, error, description });
    if (p.get('response_type') !== 'code') return back('unsupported_response_type', 'only response_type=code');
    const scope = p.get('scope') ?? '';
    if (!scope.split(' ').includes('openid')) return back('invalid_scope', 'scope must include openid');
    const challenge = p.get('code_challenge');
    if (!challenge) return back('invalid_request', 'code_challenge is required (PKCE)');
    if (p.get('code_challenge_method') !== 'S256') return back('invalid_request', 'code_challenge_method must be S256');
    if (!CHALLENGE_RE.test(challenge)) return back('invalid_request', 'code_challenge is not an S256 challenge');
    for (const name of ['state', 'nonce', 'code_challenge', 'redirect_uri']) {
      if (p.getAll(name).length > 1) return back('invalid_request', `${name} given twice`);
    }
    // prompt=none: no page at all, so a code for the browser's session or nothing.
    let silent;
    if (p.get('prompt') === 'none') {
      if (!session) return back('login_required', 'no session: sign in');
      if (p.has('id_token_hint') && verified(p.get('id_token_hint'))?.sub !== session.sub) {
        return back('login_required', 'the session is not the id_token_hint\'s user: sign in');
      }
      silent = session;
    }
    return {
      ok: {
        redirectUri,
        scope,
        challenge,
        state: p.get('state') ?? undefined,
        nonce: p.get('nonce') ?? undefined,
        silent,
      },
    };
  }

  function redirectBack(res, redirectUri, params) {
    const target = new URL(redirectUri);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) target.searchParams.set(k, v);
    res.writeHead(302, { Location: target.href, 'Cache-Control': 'no-store' }).end();
  }

  function form(res, p, problem) {
    counts.forms += 1;
    const hidden = [...p.entries()]
      .filter(([k]) => k !== 'username')
      .map(([k, v]) => `<input type="hidden" name="${escape(k)}" value="${escape(v)}">`)
      .join('\n    ');
    const body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in: local OpenID Connect issuer</title>
<style>body{font:16px system-ui,sans-serif;max-width:22rem;margin:3rem auto;padding:0 1rem}
label,input,button{display:block;width:100%;box-sizing:border-box;margin:.4rem 0}input,button{padding:.5rem}
.problem{color:#b00020}</style></head>
<body><main><h1>Sign in</h1>
${problem ? `<p class="problem" role="alert">${escape(problem)}</p>` : ''}
<form method="post" action="/authorize">
    ${hidden}
    <label for="username">Username</label>
    <input id="username" name="username" autocomplete="username" required autofocus maxlength="64">
    <button type="submit">Sign in</button>
</form></main></body></html>`;
    res
      .writeHead(problem ? 400 : 200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Cache-Control': 'no-store',
        // The form's POST is answered with a redirect to the client, which form-action must allow too.
        'Content-Security-Policy': `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${new URL(p.get('redirect_uri')).origin}; frame-ancestors 'none'`,
        'X-Content-Type-Options': 'nosniff',
      })
      .end(body);
  }

  function authorize(req, res, p) {
    const checked = checkAuthorization(p, sessionOf(req));
    if (checked.page) {
      refuse('invalid_request');
      return text(res, 400, `Sign-in refused: ${checked.page}.`);
    }
    if (checked.error) {
      refuse(checked.error);
      return redirectBack(res, checked.redirectUri, {
        error: checked.error,
        error_description: checked.description,
        state: p.get('state') ?? undefined,
        iss: url,
      });
    }
    const { redirectUri, scope, challenge, state, nonce, silent } = checked.ok;
    const issueCode = (sub, authTime) => {
      const code = randomToken();
      codes.set(code, {
        clientId,
        redirectUri,
        scope,
        challenge,
        nonce,
        sub,
        authTime,
        silent: Boolean(silent),
        expiresAt: Date.now() + CODE_LIFETIME_MS,
        used: false,
        line: randomToken(),
      });
      redirectBack(res, redirectUri, { code, state, iss: url });
    };
    if (silent) {
      counts.silentSignIns += 1;
      return issueCode(silent.sub, silent.authTime);
    }
    if (req.method === 'GET') return form(res, p);
    // POST: the form, with the request's parameters as it was shown and the username typed.
    const username = (p.get('username') ?? '').trim();
    if (!USERNAME_RE.test(username)) return form(res, p, 'A username is letters, digits and . _ @ - (up to 64).');
    // The browser's session at the issuer starts (a new one: what it had before ends).
    const previous = sessionOf(req);
    if (previous) sessions.delete(previous.id);
    const sid = randomToken();
    const authTime = now();
    sessions.set(sid, { sub: username, authTime });
    res.setHeader('Set-Cookie', `${SESSION_COOKIE}=${sid}; Path=/; HttpOnly; SameSite=Lax`);
    counts.signIns += 1;
    issueCode(username, authTime);
  }

  // RFC 7009: the public client names itself; the token is ended if it is one of its refresh tokens. The answer is
  // 200 whatever the token was (§2.2), so a client learns nothing from it.
  function revoke(req, res, p, pathname) {
    const fail = failure(req, res);
    if (refusedClient(req, p, fail)) return;
    const token = p.get('token');
    if (!token) return fail(400, 'invalid_request', 'token is required');
    const grant = refreshTokens.get(token);
    const revoked = Boolean(grant) && !revokedLines.has(grant.line);
    if (grant) revokedLines.add(grant.line);
    revocations.push({ path: pathname, clientId: p.get('client_id'), token, tokenTypeHint: p.get('token_type_hint') ?? undefined, revoked });
    res.writeHead(200, { 'Cache-Control': 'no-store', 'Content-Length': 0 }).end();
  }

  // Ends the browser's session at the issuer (and forgets the cookie).
  function endSession(req, res) {
    const session = sessionOf(req);
    if (session) sessions.delete(session.id);
    res.setHeader('Set-Cookie', `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0`);
    return Boolean(session);
  }

  // OpenID Connect RP-initiated logout: a post_logout_redirect_uri must be registered and comes with the client's
  // id or an ID token this issuer gave it; without one the issuer says the user signed out.
  function rpLogout(req, res, p, pathname) {
    const hint = p.get('id_token_hint') ?? undefined;
    const hinted = hint === undefined ? undefined : verified(hint);
    if (hint !== undefined && (!hinted || hinted.aud !== clientId)) {
      refuse('invalid_request');
      return text(res, 400, 'Sign-out refused: the id_token_hint is not an ID token issued here to this client.');
    }
    const client = p.get('client_id') ?? undefined;
    if (client !== undefined && client !== clientId) {
      refuse('invalid_request');
      return text(res, 400, 'Sign-out refused: unknown client_id.');
    }
    const back = p.get('post_logout_redirect_uri') ?? undefined;
    if (back !== undefined && (!logoutUris.includes(back) || (!hinted && client === undefined))) {
      refuse('invalid_request');
      return text(res, 400, 'Sign-out refused: post_logout_redirect_uri is not registered for this client.');
    }
    const endedSession = endSession(req, res);
    endSessionRequests.push({
      path: pathname, clientId: client, idTokenHint: hint, sub: hinted?.sub, postLogoutRedirectUri: back,
      state: p.get('state') ?? undefined, endedSession,
    });
    if (back === undefined) return text(res, 200, 'You signed out.');
    redirectBack(res, back, { state: p.get('state') ?? undefined });
  }

  // Cognito's hosted UI /logout: client_id and a logout_uri registered as the client's sign-out URL.
  function cognitoLogout(req, res, p, pathname) {
    const back = p.get('logout_uri') ?? '';
    if (p.get('client_id') !== clientId || !logoutUris.includes(back)) {
      refuse('invalid_request');
      return text(res, 400, 'Sign-out refused: unknown client_id, or logout_uri is not a sign-out URL of the client.');
    }
    const endedSession = endSession(req, res);
    endSessionRequests.push({ path: pathname, clientId: p.get('client_id'), postLogoutRedirectUri: back, endedSession });
    res.writeHead(302, { Location: back, 'Cache-Control': 'no-store' }).end();
  }

  // The error answer of the token and revocation endpoints (RFC 6749 §5.2), counted as a refusal.
  function failure(req, res) {
    return (status, error, description) => {
      refuse(error);
      json(res, status, { error, error_description: description }, req);
    };
  }

  // What both endpoints ask of their client: none but the public client, which holds no secret. True when it
  // was refused (with `fail`).
  function refusedClient(req, p, fail) {
    if (req.headers.authorization || p.has('client_secret')) {
      fail(401, 'invalid_client', 'a public client: no client secret');
      return true;
    }
    if (p.get('client_id') !== clientId) {
      fail(401, 'invalid_client', 'unknown client_id');
      return true;
    }
    return false;
  }

  function tokenEndpoint(req, res, p) {
    const fail = failure(req, res);
    if (refusedClient(req, p, fail)) return;
    const grantType = p.get('grant_type');
    if (grantType === 'authorization_code') {
      const code = p.get('code') ?? '';
      const grant = codes.get(code);
      if (!grant) return fail(400, 'invalid_grant', 'unknown code');
      if (grant.used) {
        // RFC 6749 §4.1.2: a code used twice revokes what it gave.
        revokedLines.add(grant.line);
        return fail(400, 'invalid_grant', 'the code was used already');
      }
      grant.used = true; // any attempt uses it: a wrong verifier cannot be tried again
      if (Date.now() > grant.expiresAt) return fail(400, 'invalid_grant', 'the code expired');
      if (p.get('redirect_uri') !== grant.redirectUri) {
        return fail(400, 'invalid_grant', 'redirect_uri differs from the authorization request');
      }
      const verifier = p.get('code_verifier') ?? '';
      if (!VERIFIER_RE.test(verifier)) return fail(400, 'invalid_grant', 'code_verifier is missing or malformed');
      const computed = b64url(crypto.createHash('sha256').update(verifier).digest());
      if (!safeEqual(computed, grant.challenge)) {
        return fail(400, 'invalid_grant', 'code_verifier does not match the code_challenge');
      }
      return json(res, 200, tokens(grant, 'authorization_code'), req);
    }
    if (grantType === 'refresh_token') {
      const token = p.get('refresh_token') ?? '';
      const grant = refreshTokens.get(token);
      if (!grant || revokedLines.has(grant.line)) return fail(400, 'invalid_grant', 'unknown refresh_token');
      if (grant.used) {
        // Rotation (OAuth 2.0 Security BCP §4.14): a refresh token used twice was stolen or replayed.
        revokedLines.add(grant.line);
        return fail(400, 'invalid_grant', 'the refresh_token was used already');
      }
      grant.used = true;
      if (now() > grant.exp) return fail(400, 'invalid_grant', 'the refresh_token expired');
      const scope = p.get('scope');
      if (scope && !scope.split(' ').every((s) => grant.scope.split(' ').includes(s))) {
        return fail(400, 'invalid_scope', 'a refresh may not widen the scope');
      }
      return json(res, 200, tokens({ ...grant, scope: scope || grant.scope }, 'refresh_token'), req);
    }
    return fail(400, 'unsupported_grant_type', 'authorization_code or refresh_token');
  }

  function userinfo(req, res) {
    const [scheme, token] = (req.headers.authorization ?? '').split(' ');
    const found = scheme?.toLowerCase() === 'bearer' && issued.find((t) => t.kind === 'access' && t.token === token);
    if (!found || found.exp < now()) {
      res.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
      return json(res, 401, { error: 'invalid_token' }, req);
    }
    json(res, 200, { sub: found.sub, email: `${found.sub}@example.test`, email_verified: true }, req);
  }

  function discovery() {
    const cognito = settings.flavour === 'cognito';
    return {
      issuer: url,
      authorization_endpoint: cognito ? `${url}/oauth2/authorize` : `${url}/authorize`,
      token_endpoint: cognito ? `${url}/oauth2/token` : `${url}/token`,
      jwks_uri: `${url}/jwks`,
      userinfo_endpoint: cognito ? `${url}/oauth2/userInfo` : `${url}/userinfo`,
      // A user pool's discovery names neither (its hosted UI has /oauth2/revoke and /logout).
      ...(cognito ? {} : {
        revocation_endpoint: `${url}/revoke`,
        revocation_endpoint_auth_methods_supported: ['none'],
        end_session_endpoint: `${url}/end-session`,
      }),
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: settings.refreshTokens ? ['authorization_code', 'refresh_token'] : ['authorization_code'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
      scopes_supported: ['openid', 'email'],
      claims_supported: ['iss', 'sub', 'aud', 'azp', 'exp', 'iat', 'auth_time', 'nonce', 'email', 'email_verified'],
      token_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
    };
  }

  function cors(req, res) {
    const origin = req.headers.origin;
    res.setHeader('Vary', 'Origin');
    if (origin && origins.has(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type');
      res.setHeader('Access-Control-Max-Age', '600');
    }
  }

  const server = http.createServer(async (req, res) => {
    try {
      const { pathname, searchParams } = new URL(req.url, url);
      // Cognito's paths are the same endpoints.
      const path = { '/oauth2/authorize': '/authorize', '/oauth2/token': '/token', '/oauth2/revoke': '/revoke', '/oauth2/userInfo': '/userinfo' }[pathname] ?? pathname;
      const api = ['/.well-known/openid-configuration', '/token', '/revoke', '/jwks', '/userinfo'].includes(path);
      if (api) cors(req, res);
      if (api && req.method === 'OPTIONS') return res.writeHead(204).end();
      if (path === '/.well-known/openid-configuration' && req.method === 'GET') return json(res, 200, discovery(), req);
      if (path === '/jwks' && req.method === 'GET') return json(res, 200, jwks, req);
      if (path === '/userinfo' && (req.method === 'GET' || req.method === 'POST')) return userinfo(req, res);
      if (path === '/authorize' && req.method === 'GET') return authorize(req, res, searchParams);
      if (path === '/authorize' && req.method === 'POST') {
        const form = await formBody(req);
        if (!form) return text(res, 415, 'Expected a form (application/x-www-form-urlencoded).');
        return authorize(req, res, form);
      }
      if ((path === '/token' || path === '/revoke') && req.method === 'POST') {
        const form = await formBody(req);
        if (!form) {
          refuse('invalid_request');
          return json(res, 400, { error: 'invalid_request', error_description: 'a form body is expected' }, req);
        }
        return path === '/token' ? tokenEndpoint(req, res, form) : revoke(req, res, form, pathname);
      }
      if (path === '/end-session' && req.method === 'GET') return rpLogout(req, res, searchParams, pathname);
      if (path === '/end-session' && req.method === 'POST') {
        const form = await formBody(req);
        if (!form) return text(res, 415, 'Expected a form (application/x-www-form-urlencoded).');
        return rpLogout(req, res, form, pathname);
      }
      if (path === '/logout' && req.method === 'GET') return cognitoLogout(req, res, searchParams, pathname);
      text(res, 404, 'Not found.');
    } catch (e) {
      if (!res.headersSent) text(res, e.status ?? 500, e.status ? e.message : `Internal error: ${e.message}`);
      else res.destroy();
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  url = `http://${host}:${server.address().port}`;
  return {
    url,
    jwksUrl: `${url}/jwks`,
    kid,
    counts,
    issued,
    issuedRefreshTokens,
    revocations,
    endSessionRequests,
    configure,
    // Every browser session at the issuer ends (as when they time out): prompt=none answers login_required.
    endSessions: () => sessions.clear(),
    // For tests of what a verifier refuses: a token of any header and claims, signed with the issuer's key.
    sign,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// A new RSA key, or the one in `keyFile` (made there when the file does not exist yet): issuers started one after
// the other against one backend then share their key, which the backend keeps 10 minutes (a new key's kid would
// be fetched at most every 30 s).
function signingKey(keyFile) {
  if (keyFile && fs.existsSync(keyFile)) return crypto.createPrivateKey(fs.readFileSync(keyFile));
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  if (keyFile) fs.writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  return privateKey;
}

function escape(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function safeEqual(a, b) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

function text(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' }).end(`${body}\n`);
}

function json(res, status, value, req) {
  // Token answers must not be cached (RFC 6749 §5.1); the others are small, so alike.
  res
    .writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', Pragma: 'no-cache' })
    .end(req.method === 'HEAD' ? undefined : JSON.stringify(value));
}

// The body of a form POST, or null when it is not one; over MAX_BODY_BYTES is a 413.
async function formBody(req) {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw Object.assign(new Error('The body is too large.'), { status: 413 });
    chunks.push(chunk);
  }
  if (type !== 'application/x-www-form-urlencoded') return null;
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// ---------------------------------------------------------------------------------------------------------------
// From a shell

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: process.env.OIDC_PORT ?? '9081' },
      'client-id': { type: 'string', default: process.env.OIDC_CLIENT_ID ?? 'chat-page' },
      'redirect-uri': { type: 'string', multiple: true },
      lifetime: { type: 'string', default: process.env.OIDC_TOKEN_LIFETIME_SECONDS ?? '60' },
      'no-refresh-tokens': { type: 'boolean', default: false },
      flavour: { type: 'string', default: 'oidc' },
      'key-file': { type: 'string', default: process.env.OIDC_KEY_FILE },
      'exit-with-stdin': { type: 'boolean', default: false },
    },
  });
  const redirectUris = values['redirect-uri'] ?? (process.env.OIDC_REDIRECT_URIS ?? 'http://127.0.0.1:9000/').split(',');
  const issuer = await start({
    port: Number(values.port),
    clientId: values['client-id'],
    redirectUris,
    tokenLifetimeSeconds: Number(values.lifetime),
    refreshTokens: !values['no-refresh-tokens'],
    flavour: values.flavour,
    keyFile: values['key-file'],
  });
  console.log(`oidc-issuer: client ${values['client-id']}, redirect URIs ${redirectUris.join(' ')}`);
  console.log(`oidc-issuer: ready on ${issuer.url}`);
  const stop = async () => {
    await issuer.close();
    console.log(`oidc-issuer: stopped (grants ${JSON.stringify(issuer.counts.grants)})`);
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  if (values['exit-with-stdin']) {
    process.stdin.on('end', stop);
    process.stdin.resume();
  }
}
