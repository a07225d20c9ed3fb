// A real OAuth 2.1 authorization server for the tests: npm's `oauth2-mock-server`, with RS256
// keys, serving its OpenID configuration, JWKS, /authorize (auto-approving) and /token on
// 127.0.0.1:PORT. Tokens from /token name the requested `resource` (RFC 8707) as their
// audience and carry the requested scope. Test-only routes build tokens the tests need:
//   GET /test/token?scope=&aud=&iss=&sub=&name=&expires_in=&nbf_in=&kid=&stranger=1  → a signed token
//   GET /test/rotate                                                      → a new key's kid
// Usage: node authorization_server.mjs PORT RESOURCE   (prints "ready" when it listens)
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

await server.start(port, '127.0.0.1');
server.issuer.url = `http://127.0.0.1:${port}`;
stranger.issuer.url = server.issuer.url;
console.log('ready');
