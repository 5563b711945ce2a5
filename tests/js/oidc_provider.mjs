// A real OpenID provider for the single sign-on tests (tests/support/openid.py starts it):
// panva's certified oidc-provider, issuing JWT access tokens (RFC 9068) for resource indicators.
//
//   PORT=<port> [ISSUER_PATH=/] [KEYS='{"keys":[...private JWKs...]}'] [JWKS_MAX_AGE=<seconds>]
//     [AUDIENCES='["hitl-api", ...]'] node oidc_provider.mjs
//
// Accounts: any login name at the provider's development login form; ana, bob and carol have
// a verified email and groups. POST /test/account {"login": ..., "claims": {...}} gives a login
// the claims its access tokens carry (an unverified email, a preferred_username, ...).
// Clients: "inbox" (public, PKCE) and "short-lived" (tokens for 6 seconds), both redirecting to
// REDIRECT_URI, and "web", the web inbox of an API on any loopback port. POST /test/rotate makes
// a new signing key the one in use (the old one stays published for the tokens it signed);
// POST /test/retire stops publishing every key but the one in use. With JWKS_MAX_AGE the key set
// is served with `Cache-Control: max-age=<seconds>`. AUDIENCES: the resources (audiences) it issues
// access tokens for, the first the default (docs/sso.md's recipes each name their own). On start it prints one JSON line:
// {"issuer": ..., "keys": {...the private key set, for a second provider with the same keys...}}.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const redirectUri = process.env.REDIRECT_URI || 'http://127.0.0.1/callback';
const audiences = process.env.AUDIENCES ? JSON.parse(process.env.AUDIENCES) : ['https://hitl.test/api', 'https://elsewhere.test/api'];
// A resource indicator is an absolute URI: an audience that is a bare name (Keycloak's `hitl-api`,
// Entra's application id) is asked for as urn:audience:<name> (tests/support/openid.py, resource_of).
const resourceOf = (audience) => (audience.includes(':') ? audience : `urn:audience:${audience}`);
const people = {
  ana: { email: 'ana@example.com', email_verified: true, groups: ['payments', 'staff'] },
  bob: { email: 'bob@example.com', email_verified: true, groups: ['staff'] },
  carol: { email: 'carol@example.com', email_verified: true, groups: [] },
};

function newKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

function claimsOf(accountId) {
  return { sub: accountId, ...(people[accountId] || {}) };
}

function configuration(keys) {
  return {
    clients: [
      ...['inbox', 'short-lived'].map((clientId) => ({
        client_id: clientId,
        token_endpoint_auth_method: 'none',
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      })),
      // The web inbox of an API on any loopback port (a native client's loopback redirect, RFC 8252).
      {
        client_id: 'web',
        application_type: 'native',
        token_endpoint_auth_method: 'none',
        redirect_uris: ['http://127.0.0.1/auth/callback'],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    jwks: keys,
    pkce: { required: () => true },
    scopes: ['openid', 'email', 'api'],
    claims: { openid: ['sub'], email: ['email'], api: ['groups'] },
    findAccount: async (ctx, id) => ({ accountId: id, claims: async () => claimsOf(id) }),
    // The API's person and groups ride in its access token (every claim of the account but sub).
    extraTokenClaims: async (ctx, token) => {
      if (!token.accountId) return undefined;
      const { sub, ...claims } = claimsOf(token.accountId);
      return claims;
    },
    features: {
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => resourceOf(audiences[0]),
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, resource, client) => {
          const audience = audiences.find((name) => resourceOf(name) === resource);
          if (audience === undefined) throw new Provider.errors.InvalidTarget();
          return {
            scope: 'api',
            audience,
            accessTokenFormat: 'jwt',
            accessTokenTTL: client.clientId === 'short-lived' ? 6 : 3600,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  };
}

const jwksMaxAge = process.env.JWKS_MAX_AGE;

function answer(res, body) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function jsonBody(req) {
  let text = '';
  for await (const chunk of req) text += chunk;
  return JSON.parse(text);
}

let keys = process.env.KEYS ? JSON.parse(process.env.KEYS) : { keys: [newKey()] };
let provider = new Provider(issuer, configuration(keys));

const server = http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/test/rotate') {
    // The new key first: the provider signs with the first key of an algorithm.
    keys = { keys: [newKey(), ...keys.keys] };
    provider = new Provider(issuer, configuration(keys));
    answer(res, { kid: keys.keys[0].kid });
    return;
  }
  if (req.method === 'POST' && req.url === '/test/retire') {
    const retired = keys.keys.slice(1).map((key) => key.kid);
    keys = { keys: keys.keys.slice(0, 1) };
    provider = new Provider(issuer, configuration(keys));
    answer(res, { retired });
    return;
  }
  if (req.method === 'POST' && req.url === '/test/account') {
    jsonBody(req).then(({ login, claims }) => {
      people[login] = claims;
      answer(res, { login });
    });
    return;
  }
  if (jwksMaxAge !== undefined && req.url.startsWith('/jwks')) {
    res.setHeader('cache-control', `max-age=${jwksMaxAge}`);
  }
  provider.callback()(req, res);
});

server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ issuer, keys })}\n`);
});
