// A real OAuth 2.1 authorization server for the tests: npm's `oauth2-mock-server`, with RS256
// keys, serving its OpenID configuration, JWKS, /authorize (auto-approving) and /token on
// 127.0.0.1:PORT. Tokens from /token name the requested `resource` (RFC 8707) as their
// audience and carry the requested scope. Test-only routes build tokens the tests need:
//   GET /test/token?scope=&aud=&iss=&sub=&name=&expires_in=&nbf_in=&kid=&stranger=1  → a signed token
//   GET /test/rotate                                                      → a new key's kid
// RFC 8693 token exchange (for mcpbox's token-exchange providers), at POST /exchange: the
// client `mcpbox-exchange` (secret `exchange-SECRET-91c2`, in the body or HTTP Basic) exchanges
// an access token this server issued (signature, issuer and expiry checked with jose) for a
// new one naming the same `sub`, the `audience` asked for as `aud`, the scope asked for, and
// the client as the actor (`act`). Anything else is refused with RFC 8693's errors.
//   GET /test/exchange-stats        → counts, the subjects, audiences and tokens issued
//   GET /test/exchange-deny?sub=S   → exchanges of S's tokens answer invalid_grant
//   GET /test/exchange-expiry?secs=N → exchanged tokens live N seconds (default 3600)
// Usage: node authorization_server.mjs PORT RESOURCE   (prints "ready" when it listens)
import { randomUUID } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { OAuth2Server } from 'oauth2-mock-server';

const port = Number(process.argv[2]);
const resource = process.argv[3];

const server = new OAuth2Server();
const first = await server.issuer.keys.generate('RS256');
// A key this server never publishes: tokens it signs must be refused.
const stranger = new OAuth2Server();
await stranger.issuer.keys.generate('RS256');

// The scope asked for at /authorize, by the code it issued (the token request does not repeat it).
const scopeOfCode = new Map();
server.service.on('beforeAuthorizeRedirect', (redirect, req) => {
  const code = redirect.url.searchParams.get('code');
  if (code) scopeOfCode.set(code, req.query.scope ?? '');
});

server.service.on('beforeTokenSigning', (token, req) => {
  const body = req.body ?? {};
  token.payload.aud = body.resource ?? resource;
  token.payload.sub = 'test-user';
  const scope = body.scope ?? scopeOfCode.get(body.code);
  if (scope !== undefined) token.payload.scope = scope;
});

// The token response says the scope granted (the JWT carries it too).
server.service.on('beforeResponse', (response, req) => {
  const body = req.body ?? {};
  const scope = body.scope ?? scopeOfCode.get(body.code);
  if (scope !== undefined && typeof response.body === 'object') response.body.scope = scope;
});

let current = first.kid;

server.service.addRoute('GET', '/test/token', async (req, res) => {
  const q = req.query;
  const signer = q.stranger ? stranger : server;
  const token = await signer.issuer.buildToken({
    kid: q.stranger ? undefined : (q.kid ?? current),
    expiresIn: q.expires_in !== undefined ? Number(q.expires_in) : 3600,
    scopesOrTransform: (header, payload) => {
      payload.iss = q.iss ?? server.issuer.url;
      payload.aud = q.aud ?? resource;
      payload.sub = q.sub ?? 'test-user';
      if (q.scope !== undefined) payload.scope = q.scope;
      if (q.name !== undefined) payload.name = q.name;
      if (q.nbf_in !== undefined) payload.nbf = Math.floor(Date.now() / 1000) + Number(q.nbf_in);
    },
  });
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(token);
});

server.service.addRoute('GET', '/test/rotate', async (_req, res) => {
  const key = await server.issuer.keys.generate('RS256');
  current = key.kid;
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(key.kid);
});

const EXCHANGE_CLIENT = 'mcpbox-exchange';
const EXCHANGE_SECRET = 'exchange-SECRET-91c2';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const exchanges = { exchanged: 0, refused: [], subjects: [], audiences: [], scopes: [], tokens: [] };
const denied = new Set();
let exchangeLifetime = 3600;

function exchangeClient(req) {
  const header = req.headers.authorization ?? '';
  if (header.startsWith('Basic ')) {
    const [id, secret] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':');
    return { id: decodeURIComponent(id ?? ''), secret: decodeURIComponent(secret ?? '') };
  }
  const body = req.body ?? {};
  return { id: body.client_id, secret: body.client_secret };
}

server.service.addRoute('POST', '/exchange', async (req, res) => {
  const body = req.body ?? {};
  const send = (status, value) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(value));
  };
  const refuse = (status, error, why) => {
    exchanges.refused.push(why);
    send(status, { error, error_description: why });
  };
  const who = exchangeClient(req);
  if (who.id !== EXCHANGE_CLIENT || who.secret !== EXCHANGE_SECRET) {
    return refuse(401, 'invalid_client', `client ${who.id} with a wrong secret`);
  }
  if (body.grant_type !== 'urn:ietf:params:oauth:grant-type:token-exchange') {
    return refuse(400, 'unsupported_grant_type', `grant ${body.grant_type}`);
  }
  if (body.subject_token_type !== ACCESS_TOKEN_TYPE || !body.subject_token) {
    return refuse(400, 'invalid_request', `subject_token_type ${body.subject_token_type}`);
  }
  let claims;
  try {
    const keys = createLocalJWKSet({ keys: server.issuer.keys.toJSON() });
    ({ payload: claims } = await jwtVerify(body.subject_token, keys, { issuer: server.issuer.url }));
  } catch (e) {
    return refuse(400, 'invalid_grant', `subject token: ${e.code ?? e.message}`);
  }
  if (denied.has(claims.sub)) return refuse(400, 'invalid_grant', `subject ${claims.sub} may not`);
  if (!body.audience) return refuse(400, 'invalid_target', 'no audience');
  const token = await server.issuer.buildToken({
    expiresIn: exchangeLifetime,
    scopesOrTransform: (_header, payload) => {
      payload.sub = claims.sub;
      payload.aud = body.audience;
      payload.jti = randomUUID();
      payload.act = { sub: who.id };
      if (body.scope !== undefined) payload.scope = body.scope;
    },
  });
  exchanges.exchanged += 1;
  exchanges.subjects.push(claims.sub);
  exchanges.audiences.push(body.audience);
  exchanges.scopes.push(body.scope ?? null);
  exchanges.tokens.push(token);
  send(200, {
    access_token: token,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: exchangeLifetime,
    scope: body.scope,
  });
});

server.service.addRoute('GET', '/test/exchange-stats', (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(exchanges));
});

server.service.addRoute('GET', '/test/exchange-deny', (req, res) => {
  denied.add(req.query.sub);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify([...denied]));
});

server.service.addRoute('GET', '/test/exchange-expiry', (req, res) => {
  exchangeLifetime = Number(req.query.secs);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ lifetime_secs: exchangeLifetime }));
});

await server.start(port, '127.0.0.1');
server.issuer.url = `http://127.0.0.1:${port}`;
stranger.issuer.url = server.issuer.url;
console.log('ready');
