// A downstream OAuth provider for the brokered-credentials tests (issue #56): npm's
// `oauth2-mock-server` standing in for GitHub's OAuth, which mcpbox links each user's account
// to. On top of the mock (which issues signed JWTs and, when a `code_verifier` is sent, checks
// it against the code's challenge), this script makes it behave as a real provider would:
//   - /authorize signs in the user named by the `X-Test-User` header (the simulated browser
//     sends it); without the header the user declines (`error=access_denied`). A code is
//     issued only with a PKCE `S256` challenge.
//   - /token (authorization_code) takes each code once, only from the client with its secret,
//     only with the code's `redirect_uri` and a `code_verifier` (the mock checks it matches);
//     the tokens name the user as `sub` and carry a `jti` of their own, so no two are equal.
//   - /token (refresh_token) takes each refresh token once (they rotate), from that client.
// Anything else is refused with the error a real server answers (`invalid_grant`, …).
// Test-only routes:
//   GET /test/expiry?secs=N        → access tokens issued from now on live N seconds (default 3600)
//   GET /test/refresh-fail?on=1|0  → refreshes answer 400 invalid_grant (the user revoked the app)
//   GET /test/stats                → JSON counts and every token issued, for tests to grep for
// Usage: node provider.mjs PORT CLIENT_ID CLIENT_SECRET   (prints "ready" when it listens)
import { randomUUID } from 'node:crypto';
import { OAuth2Server } from 'oauth2-mock-server';

const port = Number(process.argv[2]);
const clientId = process.argv[3];
const clientSecret = process.argv[4];

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');

let lifetimeSecs = 3600;
let refreshFails = false;
const stats = {
  authorizations: 0,
  declined: 0,
  codes_exchanged: 0,
  refreshes: 0,
  failed_refreshes: 0,
  revocations: 0,
  rejected: [],
  pkce_methods: [],
  users: [],
  access_tokens: [],
  refresh_tokens: [],
};
// code → { user, redirectUri, method }, until exchanged.
const codes = new Map();
// refresh token → user, until used.
const refreshTokens = new Map();

server.service.on('beforeAuthorizeRedirect', (redirect, req) => {
  const url = redirect.url;
  const code = url.searchParams.get('code');
  const user = req.headers['x-test-user'];
  const query = req.query ?? {};
  if (!code) return;
  if (!user) {
    stats.declined += 1;
    url.searchParams.delete('code');
    url.searchParams.set('error', 'access_denied');
    return;
  }
  if (query.client_id !== clientId || query.code_challenge_method !== 'S256' || !query.code_challenge) {
    stats.rejected.push(`authorize: client ${query.client_id}, method ${query.code_challenge_method}`);
    url.searchParams.delete('code');
    url.searchParams.set('error', 'invalid_request');
    return;
  }
  stats.authorizations += 1;
  stats.pkce_methods.push(query.code_challenge_method);
  codes.set(code, { user, redirectUri: query.redirect_uri });
});

/** The client's id and secret, from HTTP Basic or the body. */
function client(req) {
  const header = req.headers.authorization ?? '';
  if (header.startsWith('Basic ')) {
    const [id, secret] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':');
    return { id: decodeURIComponent(id ?? ''), secret: decodeURIComponent(secret ?? '') };
  }
  const body = req.body ?? {};
  return { id: body.client_id, secret: body.client_secret };
}

// Who the request is for, decided before the tokens are signed (`null`: refused later).
function userOf(body) {
  if (body.grant_type === 'authorization_code') return codes.get(body.code)?.user ?? null;
  if (body.grant_type === 'refresh_token') return refreshTokens.get(body.refresh_token) ?? null;
  return null;
}

server.service.on('beforeTokenSigning', (token, req) => {
  const body = req.body ?? {};
  const user = userOf(body);
  if (user !== null) token.payload.sub = user;
  token.payload.jti = randomUUID();
  token.payload.exp = token.payload.iat + lifetimeSecs;
});

function refuse(response, status, error, why) {
  stats.rejected.push(why);
  response.statusCode = status;
  response.body = { error, error_description: why };
}

server.service.on('beforeResponse', (response, req) => {
  const body = req.body ?? {};
  const who = client(req);
  if (who.id !== clientId || who.secret !== clientSecret) {
    return refuse(response, 401, 'invalid_client', `token: client ${who.id} with a wrong secret`);
  }
  if (body.grant_type === 'authorization_code') {
    const issued = codes.get(body.code);
    if (!issued) return refuse(response, 400, 'invalid_grant', 'token: unknown or spent code');
    codes.delete(body.code);
    if (body.redirect_uri !== issued.redirectUri) {
      return refuse(response, 400, 'invalid_grant', `token: redirect_uri ${body.redirect_uri} is not the code's`);
    }
    // The mock checks a verifier when one is sent; a code issued with a challenge needs one.
    if (!body.code_verifier) return refuse(response, 400, 'invalid_grant', 'token: no code_verifier');
    stats.codes_exchanged += 1;
    stats.users.push(issued.user);
    issue(response, issued.user);
  } else if (body.grant_type === 'refresh_token') {
    const user = refreshTokens.get(body.refresh_token);
    if (user === undefined || refreshFails) {
      stats.failed_refreshes += 1;
      return refuse(response, 400, 'invalid_grant', 'token: the refresh token is revoked or spent');
    }
    refreshTokens.delete(body.refresh_token);
    stats.refreshes += 1;
    issue(response, user);
  } else {
    return refuse(response, 400, 'unsupported_grant_type', `token: grant ${body.grant_type}`);
  }
});

/** Record the tokens of a successful answer, with the lifetime asked for. */
function issue(response, user) {
  const answer = response.body;
  answer.expires_in = lifetimeSecs;
  delete answer.id_token;
  stats.access_tokens.push(answer.access_token);
  if (answer.refresh_token) {
    stats.refresh_tokens.push(answer.refresh_token);
    refreshTokens.set(answer.refresh_token, user);
  }
}

server.service.on('beforeRevoke', () => {
  stats.revocations += 1;
});

function json(res, value) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

server.service.addRoute('GET', '/test/expiry', (req, res) => {
  lifetimeSecs = Number(req.query.secs);
  json(res, { lifetime_secs: lifetimeSecs });
});

server.service.addRoute('GET', '/test/refresh-fail', (req, res) => {
  refreshFails = req.query.on === '1';
  json(res, { refresh_fails: refreshFails });
});

server.service.addRoute('GET', '/test/stats', (_req, res) => {
  json(res, stats);
});

await server.start(port, '127.0.0.1');
server.issuer.url = `http://127.0.0.1:${port}`;
console.log('ready');
