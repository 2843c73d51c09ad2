// A real OpenID Connect provider (npm `oidc-provider`) for gpufleet's sign-in tests. Never used in production.
//
// Configuration comes from the environment (the pytest fixture in tests/support/oidc.py sets it):
//   OIDC_PORT (or argv[2])          port to listen on, always on 127.0.0.1
//   OIDC_CLIENT_ID / _SECRET        the one confidential client (code flow, PKCE S256 required)
//   OIDC_REDIRECT_URIS              comma-separated redirect URIs of that client
//   OIDC_POST_LOGOUT_REDIRECT_URIS  comma-separated post-logout redirect URIs
//   OIDC_ACCOUNTS_FILE              JSON {"alice": {"password": ..., "email": ..., "groups": [...]}, ...};
//                                   read on every lookup so a test can change someone's groups between logins
//
// The interaction pages (login, consent, logout) are deliberately plain HTML forms so tests drive them with
// `requests`: GET /interaction/<uid> shows the form for the pending prompt, POST it back to the same URL.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

import Provider from 'oidc-provider';

const port = Number(process.argv[2] || process.env.OIDC_PORT || 0);
if (!port) {
  console.error('usage: node server.mjs PORT (or OIDC_PORT=...)');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;
const list = (name) => (process.env[name] || '').split(',').map((s) => s.trim()).filter(Boolean);
const accountsFile = process.env.OIDC_ACCOUNTS_FILE;

function loadAccounts() {
  return accountsFile ? JSON.parse(fs.readFileSync(accountsFile, 'utf8')) : {};
}

const escape = (value) => String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title, body) {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${escape(title)}</title></head>`
    + `<body><h1>${escape(title)}</h1>${body}</body></html>`;
}

// A fresh RSA signing key per run: tests fetch it from /jwks like any relying party would.
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

const configuration = {
  clients: [{
    client_id: process.env.OIDC_CLIENT_ID || 'gpufleet',
    client_secret: process.env.OIDC_CLIENT_SECRET || 'gpufleet-test-secret',
    redirect_uris: list('OIDC_REDIRECT_URIS'),
    post_logout_redirect_uris: list('OIDC_POST_LOGOUT_REDIRECT_URIS'),
    response_types: ['code'],
    grant_types: ['authorization_code'],
    // mozilla-django-oidc sends the secret in the form body unless OIDC_TOKEN_USE_BASIC_AUTH is set.
    token_endpoint_auth_method: 'client_secret_post',
    id_token_signed_response_alg: 'RS256',
  }],
  // Confidential clients need not use PKCE by default; gpufleet always does, so demand it here.
  pkce: { required: () => true },
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username'],
    groups: ['groups'],
  },
  // Put the scope's claims in the ID token as well as in userinfo (some providers only do one of the two).
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out', `${form}<button type="submit" form="op.logoutForm" name="logout" value="yes">Sign out</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p>You are signed out.</p>');
      },
    },
  },
  ttl: {
    AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600,
  },
  async findAccount(_ctx, id) {
    const account = loadAccounts()[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: account.preferred_username || id,
          name: account.name || id,
          given_name: account.given_name,
          family_name: account.family_name,
          email: account.email,
          email_verified: Boolean(account.email),
          groups: account.groups || [],
        };
      },
    };
  },
  renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', `<pre>${escape(JSON.stringify(out))}</pre>`);
  },
};

const provider = new Provider(issuer, configuration);
const oidcCallback = provider.callback();

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function loginForm(uid, error) {
  return page('Sign in', `${error ? `<p class="error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}">
  <input type="hidden" name="prompt" value="login">
  <input name="login" autocomplete="username"><input name="password" type="password">
  <button type="submit">Sign in</button>
</form>`);
}

function consentForm(uid, details) {
  const scopes = (details.missingOIDCScope || []).join(' ');
  return page('Authorize', `<p>Scopes: <span id="scopes">${escape(scopes)}</span></p>
<form method="post" action="/interaction/${escape(uid)}">
  <input type="hidden" name="prompt" value="consent"><button type="submit">Continue</button>
</form>`);
}

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;
  const send = (status, html) => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(html);
  };
  if (req.method === 'GET') {
    return send(200, prompt.name === 'login' ? loginForm(uid) : consentForm(uid, prompt.details));
  }
  const form = await readForm(req);
  if (form.get('prompt') !== prompt.name) return send(400, page('Error', '<p>prompt mismatch</p>'));
  if (prompt.name === 'login') {
    const login = form.get('login') || '';
    const account = loadAccounts()[login];
    const given = Buffer.from(form.get('password') || '');
    const expected = Buffer.from(account?.password || '');
    if (!account || given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
      return send(200, loginForm(uid, 'Invalid username or password'));
    }
    return provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
  }
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    for (const [indicator, scope] of Object.entries(prompt.details.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scope.join(' '));
    }
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }
  return send(501, page('Error', `<p>prompt ${escape(prompt.name)} not implemented</p>`));
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`interaction failed: ${err.message}`);
    });
    return;
  }
  oidcCallback(req, res);
});

server.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
