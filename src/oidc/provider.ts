/**
 * OIDC login as upstream's controller serves it under `/oidc` (its `controller/oidc_auth/`):
 * discovery, the authorization-code flow with PKCE (S256) for the public `openziti` client (and
 * upstream's legacy `native`), the login steps (`/oidc/login/password|username|cert|ext-jwt`, then
 * `/oidc/login/totp` when MFA is required), `/oidc/oauth/token` (authorization_code, refresh_token
 * with rotation), `/oidc/revoke`, `/oidc/end_session`, `/oidc/userinfo`, `/oidc/oauth/introspect`
 * (routes.ts also serves each under the other names upstream's clients send it to).
 *
 * Every OIDC login is an API session: the record is made when the login step succeeds (so the
 * common login rules, lockout, MFA and every revocation path apply unchanged), and every token
 * the flow issues names it (`z_asid`). Access tokens (`z_t: "a"`) are Bearer tokens on every
 * operation while that record lives (ApiSessions.resolve); deleting the record — logout, revoke,
 * end session, admin delete, identity disable… — ends access and refresh tokens at once.
 *
 * Refresh tokens rotate: the record keeps the id of the one refresh token of the family still
 * usable; presenting an older one is a reuse — the family (the API session) ends and the
 * request is refused.
 *
 * Pending authorization requests and codes live in memory for a few minutes, as upstream keeps
 * them: a login in flight does not survive a restart and must be on the controller it started on.
 *
 * Nothing here writes the store: the login is `Logins.login` (as `POST /authenticate`), the TOTP
 * steps are `Mfa`'s, and the refresh family and session certificates kept on the API session are
 * `OidcSessions`' (src/managers/). What this holds is protocol state that is never stored.
 */
import crypto from 'node:crypto';
import type { App } from '../api/context.js';
import type { Reply, Req } from '../core/operation.js';
import { ApiError, errors } from '../core/errors.js';
import { subjectText } from '../managers/issuing.js';
import { fingerprintOf } from '../pki/certs.js';
import { VALIDITY } from '../pki/sign-csr.js';
import type { MfaRecord } from '../auth/mfa.js';
import { ACCESS_TOKEN, REFRESH_TOKEN, type ApiSession } from '../auth/api-sessions.js';
import { effectiveSettings } from '../control/settings.js';

const CLIENT_IDS = new Set(['openziti', 'native']);
const ID_TOKEN = 'id';
/** How long an authorization request may take to complete its login, and a code to be exchanged. */
const REQUEST_TTL_MS = 10 * 60_000;
const CODE_TTL_MS = 5 * 60_000;
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TOKEN_TYPE_ACCESS = 'urn:ietf:params:oauth:token-type:access_token';
const TOKEN_TYPE_REFRESH = 'urn:ietf:params:oauth:token-type:refresh_token';
const TOKEN_TYPE_ID = 'urn:ietf:params:oauth:token-type:id_token';

export interface OidcSettings {
  redirectUris: string[];
  postLogoutUris: string[];
  accessTokenSeconds: number;
  refreshTokenSeconds: number;
  /**
   * Where this controller serves an admin console (`/zac`), if it does: a redirect or post-logout
   * URI on the origin the request came to, under that path or upstream's console's
   * `/auth/callback` and `/auth/logout`, is accepted without being registered — it is this
   * controller's own page.
   */
  consolePath?: string;
}

interface AuthRequest {
  id: string;
  clientId: string;
  redirectUri: string;
  state?: string;
  nonce?: string;
  codeChallenge: string;
  scopes: string[];
  expiresAt: number;
  /** Set by a successful primary login step. */
  apiSessionId?: string;
  authTime?: number;
  method?: string;
  /** SHA-1 of the client certificate a certificate login presented: the tokens are bound to it. */
  authCertFingerprint?: string;
  /** `csrPem` of the login step: signed at the code exchange into a session certificate. */
  csrPem?: string;
}

/**
 * Certificate binding of a login's tokens (upstream's `z_cfs`/`z_acf` claims): a certificate
 * login binds them to its certificate, a CSR to the session certificate made from it. A bound
 * refresh token or exchange subject is accepted only over a TLS connection presenting one of
 * those certificates, and only then may it carry `csr_pem` for a new session certificate.
 */
interface CertBinding {
  fingerprints: string[];
  authCertFingerprint?: string;
}

/** An OAuth error answer (RFC 6749 §5.2 shape). */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
  }
}

const b64url = (b: Buffer) => b.toString('base64url');
const randomId = () => b64url(crypto.randomBytes(32));

/** `*` in a registered URI matches any run of characters other than `/` (upstream matches with path.Match). */
function globMatch(pattern: string, value: string): boolean {
  const re = new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')}$`);
  return re.test(value);
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/** Fields of a form-encoded or JSON body, as strings (configTypes kept as a list). */
export function parseFields(req: Req): Record<string, unknown> {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const text = req.body.toString('utf8');
  if (type === 'application/json') {
    if (text.trim() === '') return {};
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      throw new OAuthError('invalid_request', 'the body is not valid JSON');
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new OAuthError('invalid_request', 'the body must be a JSON object');
    return v as Record<string, unknown>;
  }
  const out: Record<string, unknown> = {};
  const form = new URLSearchParams(text);
  for (const k of new Set(form.keys())) out[k] = k === 'configTypes' ? form.getAll(k) : form.get(k);
  return out;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

const ENV_FIELDS = ['arch', 'domain', 'hostname', 'os', 'osRelease', 'osVersion'];
const SDK_FIELDS = ['appId', 'appVersion', 'branch', 'revision', 'type', 'version'];

/**
 * The `envInfo`/`sdkInfo` a login step carries: objects in JSON (as `/authenticate` takes them),
 * or flat form fields as upstream's SDKs post them (`envArch`, `envOsRelease`, `sdkAppID`…).
 * Only strings of the known fields are kept; undefined when none was sent.
 */
function loginInfo(body: Record<string, unknown>, prefix: 'env' | 'sdk'): Record<string, string> | undefined {
  const fields = prefix === 'env' ? ENV_FIELDS : SDK_FIELDS;
  const nested = body[`${prefix}Info`];
  const obj = nested !== null && typeof nested === 'object' && !Array.isArray(nested) ? (nested as Record<string, unknown>) : {};
  const out: Record<string, string> = {};
  for (const f of fields) {
    const flat = `${prefix}${f[0].toUpperCase()}${f.slice(1)}`;
    const v = obj[f] ?? body[flat] ?? (f === 'appId' ? body.sdkAppID : undefined);
    if (typeof v === 'string' && v !== '') out[f] = v.slice(0, 256);
  }
  return Object.keys(out).length ? out : undefined;
}

export class OidcProvider {
  private readonly requests = new Map<string, AuthRequest>();
  /** code → authorization-request id. */
  private readonly codes = new Map<string, { requestId: string; expiresAt: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly app: App,
    private readonly settings: OidcSettings,
  ) {
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  get issuer(): string {
    return `${this.app.baseUrl}/oidc`;
  }

  private sweep(now = Date.now()) {
    for (const [id, r] of this.requests) if (r.expiresAt <= now) this.requests.delete(id);
    for (const [c, v] of this.codes) if (v.expiresAt <= now) this.codes.delete(c);
  }

  discovery(): Record<string, unknown> {
    const iss = this.issuer;
    return {
      issuer: iss,
      authorization_endpoint: `${iss}/authorize`,
      token_endpoint: `${iss}/oauth/token`,
      userinfo_endpoint: `${iss}/userinfo`,
      revocation_endpoint: `${iss}/revoke`,
      end_session_endpoint: `${iss}/end_session`,
      jwks_uri: `${iss}/keys`,
      scopes_supported: ['openid', 'offline_access'],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['ES256'],
      request_object_signing_alg_values_supported: ['ES256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
      claims_supported: ['sub', 'aud', 'exp', 'iat', 'iss', 'auth_time', 'nonce', 'amr', 'z_asid', 'z_ct', 'name'],
      request_parameter_supported: false,
      request_uri_parameter_supported: false,
      openziti_endpoints: {
        password: `${iss}/login/password`,
        cert: `${iss}/login/cert`,
        ext_jwt: `${iss}/login/ext-jwt`,
        totp: `${iss}/login/totp`,
        totp_enroll: `${iss}/login/totp/enroll`,
        totp_enroll_verify: `${iss}/login/totp/enroll/verify`,
        auth_queries: `${iss}/login/auth-queries`,
      },
    };
  }

  /** The configured URIs plus those of the controller settings (`/controller-settings`, global and this controller's). */
  private allowed(key: 'redirectUris' | 'postLogoutUris', uri: string): boolean {
    // A pattern's `*` can match text that is no URL (`http://127.0.0.1:[x]/…`): nothing could be sent there.
    if (!URL.canParse(uri)) return false;
    const configured = key === 'redirectUris' ? this.settings.redirectUris : this.settings.postLogoutUris;
    const fromSettings = effectiveSettings(this.app.store, this.app.controllerId).effective.oidc[key] ?? [];
    return configured.some((p) => globMatch(p, uri)) || fromSettings.some((p) => globMatch(p, uri));
  }

  redirectAllowed(uri: string): boolean {
    return this.allowed('redirectUris', uri);
  }

  /** A URI of the console this controller serves, on `origin` (the request's own; see OidcSettings.consolePath). */
  private ownConsole(key: 'redirectUris' | 'postLogoutUris', uri: string, origin: string | undefined): boolean {
    const base = this.settings.consolePath;
    if (!base || !origin || !URL.canParse(uri)) return false;
    const u = new URL(uri);
    return u.origin === origin && (u.pathname.startsWith(`${base}/`) || u.pathname === (key === 'redirectUris' ? '/auth/callback' : '/auth/logout'));
  }

  /**
   * `/oidc/authorize`: checks the client and redirect URI (refused in OAuth error JSON: nothing
   * may be sent to an unregistered URI), then answers 302 to the password login step.
   */
  authorize(params: URLSearchParams | Record<string, unknown>, origin?: string): Reply {
    const get = (k: string) => (params instanceof URLSearchParams ? (params.get(k) ?? undefined) : str(params[k]));
    const clientId = get('client_id');
    if (!clientId || !CLIENT_IDS.has(clientId)) throw new OAuthError('invalid_client', 'unknown client_id', 400);
    const redirectUri = get('redirect_uri');
    if (!redirectUri) throw new OAuthError('invalid_request', 'redirect_uri is required');
    if (!this.redirectAllowed(redirectUri) && !this.ownConsole('redirectUris', redirectUri, origin)) throw new OAuthError('invalid_request', 'redirect_uri is not registered in the controller settings');
    const state = get('state');
    const back = (error: string, description: string): Reply => this.redirect(redirectUri, { error, error_description: description, state });
    if (get('response_type') !== 'code') return back('unsupported_response_type', 'only response_type=code is supported');
    const scopes = (get('scope') ?? '').split(' ').filter(Boolean);
    if (!scopes.includes('openid')) return back('invalid_scope', 'the openid scope is required');
    const codeChallenge = get('code_challenge');
    if (!codeChallenge || !/^[A-Za-z0-9_-]{43}$/.test(codeChallenge)) return back('invalid_request', 'code_challenge (S256 of the verifier, base64url) is required');
    if (get('code_challenge_method') !== 'S256') return back('invalid_request', 'code_challenge_method must be S256');
    const req: AuthRequest = { id: randomId(), clientId, redirectUri, state, nonce: get('nonce'), codeChallenge, scopes, expiresAt: Date.now() + REQUEST_TTL_MS };
    this.requests.set(req.id, req);
    return { status: 302, headers: { location: `${this.issuer}/login/password?authRequestID=${req.id}`, 'auth-request-id': req.id }, body: '' };
  }

  private redirect(uri: string, params: Record<string, string | undefined>): Reply {
    const u = new URL(uri);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
    return { status: 302, headers: { location: u.toString() }, body: '' };
  }

  private pending(id: unknown): AuthRequest {
    const r = typeof id === 'string' ? this.requests.get(id) : undefined;
    if (!r || r.expiresAt <= Date.now()) throw new ApiError('INVALID_AUTH');
    return r;
  }

  private callback(r: AuthRequest): Reply {
    return { status: 302, headers: { location: `${this.issuer}/authorize/callback?id=${r.id}` }, body: '' };
  }

  /**
   * A primary login step (`method`: password, cert, ext-jwt) for a pending authorization request:
   * the same rules as `POST /authenticate`; on success an API session exists for the request.
   * With TOTP still to pass the answer lists the auth queries (header `totp-required: true`);
   * otherwise it is the 302 to the callback that hands out the code.
   */
  login(method: string, req: Req): Promise<Reply> {
    // The same queue as `POST /authenticate`: logins are the expensive, attackable requests.
    return this.app.auth.limits.auth.run(() => this.loginStep(method, req));
  }

  private async loginStep(method: string, req: Req): Promise<Reply> {
    const body = parseFields(req);
    const r = this.pending(body.id ?? body.authRequestID ?? req.query.get('authRequestID') ?? req.query.get('id'));
    const ct = body.configTypes;
    if (ct !== undefined && typeof ct !== 'string' && !(Array.isArray(ct) && ct.every((c) => typeof c === 'string')))
      throw errors.field('configTypes', 'must be a list of config type names or ids', ct);
    if (body.csrPem !== undefined && typeof body.csrPem !== 'string') throw errors.field('csrPem', 'must be a PEM encoded certificate signing request', body.csrPem);
    // The same login as `POST /authenticate`. The auth policy's secondary external-JWT factor is
    // proven here, at login, by a token of that signer among the request's Bearer tokens (as
    // upstream does); the login's tokens then stand for it. Without one the login stays pending
    // with an EXT-JWT auth query and gets no code.
    const { session } = await this.app.logins.login({
      method,
      fields: body,
      req,
      configTypes: typeof ct === 'string' ? [ct] : ct,
      // What the client says of itself, kept on the identity as `/authenticate` keeps it.
      envInfo: loginInfo(body, 'env'),
      sdkInfo: loginInfo(body, 'sdk'),
      extJwtAtLogin: true,
    });
    // A second login for the same request replaces the first one's API session.
    if (r.apiSessionId) await this.app.sessions.delete(r.apiSessionId);
    r.apiSessionId = session.id;
    r.method = method;
    r.authTime = Date.now();
    const leaf = method === 'cert' ? (req.peerLeaf ?? req.peerCertificates?.[0]) : undefined;
    r.authCertFingerprint = leaf ? fingerprintOf(leaf) : undefined;
    r.csrPem = str(body.csrPem);
    return this.next(r, session);
  }

  /** What the login's API session still has to pass (upstream's auth queries of an OIDC login). */
  private pendingQueries(s: ApiSession): Record<string, unknown>[] {
    const queries: Record<string, unknown>[] = [];
    if (s.isMfaRequired && !s.isMfaComplete) {
      const mfa = this.app.store.get('identities', s.identityId)?.mfa as MfaRecord | undefined;
      queries.push({ typeId: 'TOTP', provider: 'mesh', format: 'numeric', httpMethod: 'POST', httpUrl: `${this.issuer}/login/totp`, minLength: 6, maxLength: 6, isTotpEnrolled: mfa?.isVerified === true });
    }
    if (s.extJwtSignerId) {
      const signer = this.app.store.get('externalJwtSigners', s.extJwtSignerId);
      queries.push({ typeId: 'EXT-JWT', provider: 'URL', id: s.extJwtSignerId, httpUrl: signer?.externalAuthUrl ?? '', clientId: signer?.clientId ?? '', scopes: signer?.scopes ?? [] });
    }
    return queries;
  }

  /** After a step: the auth queries still open (200, header `totp-required` when TOTP is one), or the 302 to the callback. */
  private next(r: AuthRequest, s: ApiSession): Reply {
    const authQueries = this.pendingQueries(s);
    if (authQueries.length === 0) return this.callback(r);
    const totp = authQueries.some((q) => q.typeId === 'TOTP');
    return { status: 200, body: { authQueries }, headers: { ...(totp ? { 'totp-required': 'true' } : {}), 'auth-request-id': r.id } };
  }

  /** `GET /oidc/login/auth-queries?id=`: what the pending request still has to pass. */
  authQueries(id: string | null): Reply {
    const r = this.pending(id);
    const s = r.apiSessionId ? this.app.sessions.get(r.apiSessionId) : undefined;
    return { status: 200, body: { authQueries: s ? this.pendingQueries(s) : [] } };
  }

  /** `/oidc/login/totp`: the TOTP step of a request whose login needs it. */
  async totp(req: Req): Promise<Reply> {
    const body = parseFields(req);
    const r = this.pending(body.id ?? body.authRequestID);
    const s = r.apiSessionId ? this.app.sessions.get(r.apiSessionId) : undefined;
    if (!s) throw new ApiError('INVALID_AUTH');
    const notEnabled = () => new OAuthError('invalid_request', 'TOTP supplied but not enabled on the identity');
    if (!(this.app.store.get('identities', s.identityId)?.mfa as MfaRecord | undefined)?.isVerified) throw notEnabled();
    // As `/authenticate/mfa` (and upstream's step): a TOTP code or an unused recovery code (then
    // used up), under the identity's brake; a wrong one is 400 MFA_INVALID_TOKEN, which SDKs read
    // as "the code did not verify".
    await this.app.mfa.pass(s.identityId, s.id, str(body.code) ?? '', notEnabled);
    return this.next(r, this.app.sessions.get(s.id) ?? s);
  }

  /**
   * The pending request of a TOTP-enrollment step and the API session its primary login made:
   * enrollment is open only to whoever passed a primary login step of the request.
   */
  private primaryPassed(req: Req, body: Record<string, unknown>) {
    const r = this.pending(body.id ?? body.authRequestID ?? req.query.get('authRequestID') ?? req.query.get('id'));
    const s = r.apiSessionId ? this.app.sessions.get(r.apiSessionId) : undefined;
    if (!s) throw new ApiError('INVALID_AUTH');
    return { r, s };
  }

  /** What an unverified enrollment shows (as `GET /current-identity/mfa` does): the secret's URL and the recovery codes. */
  private enrollmentDetail(identityName: string, mfa: MfaRecord) {
    return {
      id: mfa.id,
      createdAt: new Date(mfa.createdAt).toISOString(),
      updatedAt: new Date(mfa.updatedAt).toISOString(),
      isVerified: false,
      ...this.app.mfa.provisioning(identityName, mfa),
    };
  }

  /**
   * `POST /oidc/login/totp/enroll {id}`: a login whose auth policy requires TOTP, of an identity
   * that has none, starts an enrollment (201 with the provisioning URL and recovery codes, as
   * `POST /current-identity/mfa` followed by its detail). One enrollment per identity (409).
   */
  async startTotpEnrollment(req: Req): Promise<Reply> {
    const body = parseFields(req);
    const { s } = this.primaryPassed(req, body);
    const name = String(this.app.store.get('identities', s.identityId)?.name);
    const mfa = await this.app.mfa.enroll(s.identityId);
    return { status: 201, body: this.enrollmentDetail(name, mfa), headers: { 'cache-control': 'no-store' } };
  }

  /** The unverified enrollment of a request's identity (for a login page shown again). */
  pendingEnrollment(req: Req): ReturnType<OidcProvider['enrollmentDetail']> | undefined {
    const { s } = this.primaryPassed(req, parseFields(req));
    const identity = this.app.store.get('identities', s.identityId);
    const mfa = identity?.mfa as MfaRecord | undefined;
    return identity && mfa && !mfa.isVerified ? this.enrollmentDetail(String(identity.name), mfa) : undefined;
  }

  /**
   * `DELETE /oidc/login/totp/enroll {id, code}`: drops the identity's enrollment; a verified one
   * only with a good TOTP or recovery code (as `DELETE /current-identity/mfa`).
   */
  async deleteTotpEnrollment(req: Req): Promise<Reply> {
    const body = parseFields(req);
    const { s } = this.primaryPassed(req, body);
    await this.app.mfa.remove(s.identityId, str(body.code) ?? '');
    return { status: 200, body: {} };
  }

  /**
   * `POST /oidc/login/totp/enroll/verify {id, code}`: a TOTP code of the new secret verifies the
   * enrollment and passes the login's TOTP step in the same write; then the 302 to the callback
   * that issues the code.
   */
  async verifyTotpEnrollment(req: Req): Promise<Reply> {
    const body = parseFields(req);
    const { r, s } = this.primaryPassed(req, body);
    await this.app.mfa.verify(s.identityId, s.id, str(body.code));
    return this.next(r, this.app.sessions.get(s.id) ?? s);
  }


  /** `/oidc/authorize/callback?id=`: a request whose login is complete gets its code. */
  authorizeCallback(id: string | null): Reply {
    const r = this.pending(id);
    const s = r.apiSessionId ? this.app.sessions.get(r.apiSessionId) : undefined;
    if (!s || this.pendingQueries(s).length > 0) throw new ApiError('INVALID_AUTH');
    const code = randomId();
    this.codes.set(code, { requestId: r.id, expiresAt: Date.now() + CODE_TTL_MS });
    return this.redirect(r.redirectUri, { code, state: r.state });
  }

  /** `/oidc/oauth/token`. */
  async token(req: Req): Promise<Reply> {
    const f = parseFields(req);
    const clientId = str(f.client_id);
    if (!clientId || !CLIENT_IDS.has(clientId)) throw new OAuthError('invalid_client', 'unknown client_id', 401);
    switch (f.grant_type) {
      case 'authorization_code':
        return this.codeGrant(clientId, f);
      case 'refresh_token':
        return this.refreshGrant(req, clientId, f);
      case TOKEN_EXCHANGE:
        return this.exchangeGrant(req, clientId, f);
      default:
        throw new OAuthError('unsupported_grant_type', `grant_type must be authorization_code, refresh_token or ${TOKEN_EXCHANGE}`);
    }
  }

  private async codeGrant(clientId: string, f: Record<string, unknown>): Promise<Reply> {
    const code = str(f.code);
    const entry = code ? this.codes.get(code) : undefined;
    // A code is good once: taken out before anything else is checked.
    if (code) this.codes.delete(code);
    const r = entry && entry.expiresAt > Date.now() ? this.requests.get(entry.requestId) : undefined;
    if (!r) throw new OAuthError('invalid_grant', 'the code is unknown, used or expired');
    this.requests.delete(r.id);
    const s = r.apiSessionId ? this.app.sessions.get(r.apiSessionId) : undefined;
    if (!s) throw new OAuthError('invalid_grant', 'the login of this code has ended');
    const end = async (description: string) => {
      // A failed exchange ends the login: the code cannot be tried again anyway.
      await this.app.sessions.delete(s.id);
      return new OAuthError('invalid_grant', description);
    };
    if (r.clientId !== clientId) throw await end('the code was issued to another client');
    if (str(f.redirect_uri) !== r.redirectUri) throw await end('redirect_uri does not match the authorization request');
    const verifier = str(f.code_verifier);
    if (!verifier || !/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) throw await end('code_verifier is required (43 to 128 characters)');
    const challenge = b64url(crypto.createHash('sha256').update(verifier).digest());
    if (!sameSecret(challenge, r.codeChallenge)) throw await end('code_verifier does not match the code_challenge');
    const binding: CertBinding = { fingerprints: r.authCertFingerprint ? [r.authCertFingerprint] : [], authCertFingerprint: r.authCertFingerprint };
    let sessionCert: string | undefined;
    if (r.csrPem) {
      try {
        sessionCert = await this.sessionCertificate(s, r.csrPem, binding);
      } catch (e) {
        if (e instanceof OAuthError) await end(e.description);
        throw e;
      }
    }
    return this.issue(s, { clientId, scopes: r.scopes, nonce: r.nonce, authTime: r.authTime, method: r.method, withIdToken: true, binding, sessionCert });
  }

  /**
   * Signs a CSR into a certificate of the API session (listed under `/current-api-session/certificates`,
   * ended with the session) and binds the tokens to it in place of an earlier session certificate.
   */
  private async sessionCertificate(s: ApiSession, csr: string, binding: CertBinding): Promise<string> {
    let cert;
    try {
      [cert] = await this.app.issuing.sign([{ csr, profile: 'client', validityMs: VALIDITY.apiSession, field: 'csrPem' }]);
    } catch (e) {
      if (e instanceof ApiError) throw new OAuthError('invalid_request', `invalid CSR: ${e.errorCause && 'reason' in e.errorCause ? e.errorCause.reason : e.message}`);
      throw e;
    }
    const stored = await this.app.oidcSessions.addCertificate(s, { ...cert, subject: subjectText(new crypto.X509Certificate(cert.pem)) });
    if (!stored) throw new OAuthError('invalid_grant', 'the login of this token has ended');
    binding.fingerprints = [...(binding.authCertFingerprint ? [binding.authCertFingerprint] : []), cert.fingerprint];
    return this.app.issuing.withChain(cert.pem);
  }

  /**
   * The binding a refresh token or exchange subject carries; when it is bound, the TLS client
   * certificate of this request must be one of its certificates, and `csr_pem` renews the
   * session certificate.
   */
  private async proofOfPossession(req: Req, s: ApiSession, claims: Record<string, unknown>, f: Record<string, unknown>): Promise<{ binding: CertBinding; sessionCert?: string }> {
    const fingerprints = Array.isArray(claims.z_cfs) ? claims.z_cfs.filter((x): x is string => typeof x === 'string') : [];
    const binding: CertBinding = { fingerprints, authCertFingerprint: typeof claims.z_acf === 'string' ? claims.z_acf : undefined };
    if (fingerprints.length === 0) return { binding };
    const leaf = req.peerLeaf ?? req.peerCertificates?.[0];
    if (!leaf || !fingerprints.includes(fingerprintOf(leaf))) throw new OAuthError('access_denied', 'peer certificate fingerprint does not match token');
    const csr = str(f.csr_pem);
    return { binding, sessionCert: csr ? await this.sessionCertificate(s, csr, binding) : undefined };
  }

  /** The live OIDC API session of a refresh token, ending its family when the token was already rotated. */
  private async currentRefresh(clientId: string, token: string | undefined) {
    const claims = token ? this.app.keys.verify(token, REFRESH_TOKEN) : undefined;
    if (!claims || typeof claims.z_asid !== 'string') throw new OAuthError('invalid_grant', 'the refresh token is invalid or expired');
    const asid = claims.z_asid;
    let s = this.app.sessions.get(asid);
    if (!s?.oidc || s.identityId !== claims.sub) throw new OAuthError('invalid_grant', 'the refresh token has been revoked');
    if (s.oidc.clientId !== clientId) throw new OAuthError('invalid_grant', 'the refresh token was issued to another client');
    if (s.oidc.refreshJti !== claims.jti) {
      // Reuse of a rotated refresh token: whoever holds the family may be an attacker; end it.
      const reused = await this.app.oidcSessions.endIfReused(asid, claims.jti);
      if (reused) throw new OAuthError('invalid_grant', 'the refresh token was already used; its tokens are revoked');
      s = this.app.sessions.get(asid);
      if (!s?.oidc) throw new OAuthError('invalid_grant', 'the refresh token has been revoked');
    }
    return { s, oidc: s.oidc, jti: claims.jti, claims };
  }

  private async refreshGrant(req: Req, clientId: string, f: Record<string, unknown>): Promise<Reply> {
    const { s, oidc, jti, claims } = await this.currentRefresh(clientId, str(f.refresh_token));
    const { binding, sessionCert } = await this.proofOfPossession(req, s, claims, f);
    return this.issue(s, { clientId, scopes: oidc.scopes, previousRefresh: jti, withIdToken: true, binding, sessionCert });
  }

  /**
   * RFC 8693 token exchange, as upstream allows it: an access token for a new access token, a
   * refresh token for new access and refresh tokens (rotating it like the refresh grant); audience
   * `openziti` (or `native`), scopes `openid` and `offline_access` only.
   */
  private async exchangeGrant(req: Req, clientId: string, f: Record<string, unknown>): Promise<Reply> {
    const subjectType = str(f.subject_token_type);
    const requested = str(f.requested_token_type) ?? subjectType;
    for (const aud of [f.audience].flat()) {
      if (aud !== undefined && aud !== '' && !CLIENT_IDS.has(String(aud))) throw new OAuthError('invalid_target', `invalid audience requested [${String(aud)}]`);
    }
    for (const sc of (str(f.scope) ?? '').split(' ').filter(Boolean)) {
      if (sc !== 'openid' && sc !== 'offline_access') throw new OAuthError('invalid_scope', `invalid scope requested [${sc}]`);
    }
    const token = str(f.subject_token);
    if (!token) throw new OAuthError('invalid_request', 'subject_token is required');
    if (requested === TOKEN_TYPE_ID && (subjectType === TOKEN_TYPE_ACCESS || subjectType === TOKEN_TYPE_REFRESH)) return this.idTokenExchange(req, clientId, token, subjectType);
    if (subjectType === TOKEN_TYPE_ACCESS) {
      if (requested !== TOKEN_TYPE_ACCESS) throw new OAuthError('invalid_request', 'an access token can only be exchanged for an access token');
      const claims = this.app.keys.verify(token, ACCESS_TOKEN);
      const s = this.sessionOfToken(token, [ACCESS_TOKEN]);
      if (!claims || !s?.oidc) throw new OAuthError('invalid_grant', 'the subject token is invalid, expired or revoked');
      const { binding, sessionCert } = await this.proofOfPossession(req, s, claims, f);
      return this.issue(s, { clientId, scopes: s.oidc.scopes, accessOnly: true, withIdToken: false, issuedType: TOKEN_TYPE_ACCESS, binding, sessionCert });
    }
    if (subjectType === TOKEN_TYPE_REFRESH) {
      if (requested !== TOKEN_TYPE_ACCESS && requested !== TOKEN_TYPE_REFRESH) throw new OAuthError('invalid_request', 'a refresh token can only be exchanged for access or refresh tokens');
      const { s, oidc, jti, claims } = await this.currentRefresh(clientId, token);
      const { binding, sessionCert } = await this.proofOfPossession(req, s, claims, f);
      return this.issue(s, { clientId, scopes: oidc.scopes, previousRefresh: jti, withIdToken: false, issuedType: TOKEN_TYPE_REFRESH, binding, sessionCert });
    }
    throw new OAuthError('invalid_request', `exchange subject type (${subjectType ?? ''}) is not supported`);
  }

  /**
   * An ID token for an access or refresh token of a live OIDC login, returned in `access_token`
   * (`token_type` N_A) as upstream's OIDC library answers it. Upstream's Go SDK renews its tokens
   * with two exchanges of the same refresh token — for a refresh token, then for an ID token — so
   * this one neither rotates the refresh token nor takes a just-rotated one as a reuse: an ID
   * token opens no API, and the login it names must still live.
   */
  private async idTokenExchange(req: Req, clientId: string, token: string, subjectType: string): Promise<Reply> {
    const claims = this.app.keys.verify(token, subjectType === TOKEN_TYPE_ACCESS ? ACCESS_TOKEN : REFRESH_TOKEN);
    const s = claims && typeof claims.z_asid === 'string' ? this.app.sessions.get(claims.z_asid) : undefined;
    if (!claims || !s?.oidc || s.identityId !== claims.sub) throw new OAuthError('invalid_grant', 'the subject token is invalid, expired or revoked');
    if (subjectType === TOKEN_TYPE_REFRESH && s.oidc.clientId !== clientId) throw new OAuthError('invalid_grant', 'the refresh token was issued to another client');
    await this.proofOfPossession(req, s, claims, {});
    const now = Math.floor(Date.now() / 1000);
    const idToken = this.app.keys.sign({
      iss: this.issuer, sub: s.identityId, aud: [clientId], iat: now, exp: now + this.settings.accessTokenSeconds, jti: randomId(), z_t: ID_TOKEN, z_asid: s.id, scopes: s.oidc.scopes,
    });
    return {
      status: 200,
      body: { access_token: idToken, issued_token_type: TOKEN_TYPE_ID, token_type: 'N_A', expires_in: this.settings.accessTokenSeconds, scope: s.oidc.scopes.join(' ') },
      headers: { 'cache-control': 'no-store', pragma: 'no-cache' },
    };
  }

  /**
   * New access, refresh (and ID) tokens for an API session; the refresh token's id becomes the
   * family's only valid one in the same write that checks the previous one is still current.
   */
  private async issue(
    s: ApiSession,
    o: {
      clientId: string;
      scopes: string[];
      nonce?: string;
      authTime?: number;
      method?: string;
      previousRefresh?: string;
      withIdToken: boolean;
      /** A new access token only: the refresh token family is left as it is. */
      accessOnly?: boolean;
      /** Token exchange: the `issued_token_type` of the answer. */
      issuedType?: string;
      binding?: CertBinding;
      /** A session certificate signed for this request (PEM with its chain): `session_cert` of the answer. */
      sessionCert?: string;
    },
  ): Promise<Reply> {
    const keys = this.app.keys;
    const now = Math.floor(Date.now() / 1000);
    const refreshJti = randomId();
    const rotated = await this.app.oidcSessions.recordIssue(s.id, {
      previousRefresh: o.previousRefresh,
      oidc: o.accessOnly ? undefined : { clientId: o.clientId, refreshJti, scopes: o.scopes },
    });
    if (!rotated) throw new OAuthError('invalid_grant', 'the refresh token was already used or revoked');
    const bound = o.binding && o.binding.fingerprints.length > 0 ? { z_cfs: o.binding.fingerprints, ...(o.binding.authCertFingerprint ? { z_acf: o.binding.authCertFingerprint } : {}) } : {};
    const common = { iss: this.issuer, sub: s.identityId, aud: ['openziti'], iat: now, z_asid: s.id, scopes: o.scopes, ...bound };
    const accessExp = now + this.settings.accessTokenSeconds;
    const access = keys.sign({ ...common, jti: randomId(), exp: accessExp, z_t: ACCESS_TOKEN, z_ct: s.configTypes, z_authid: s.authenticatorId });
    const body: Record<string, unknown> = {
      access_token: access,
      token_type: 'Bearer',
      expires_in: this.settings.accessTokenSeconds,
      scope: o.scopes.join(' '),
    };
    if (!o.accessOnly) body.refresh_token = keys.sign({ ...common, jti: refreshJti, exp: now + this.settings.refreshTokenSeconds, z_t: REFRESH_TOKEN });
    if (o.issuedType) body.issued_token_type = o.issuedType;
    if (o.sessionCert) body.session_cert = o.sessionCert;
    if (o.withIdToken) {
      const amr = o.method ? [o.method === 'password' ? 'pwd' : o.method] : undefined;
      body.id_token = keys.sign({
        ...common,
        aud: [o.clientId],
        jti: randomId(),
        exp: accessExp,
        z_t: ID_TOKEN,
        ...(o.nonce ? { nonce: o.nonce } : {}),
        ...(o.authTime ? { auth_time: Math.floor(o.authTime / 1000) } : {}),
        ...(amr ? { amr } : {}),
      });
    }
    return { status: 200, body, headers: { 'cache-control': 'no-store', pragma: 'no-cache' } };
  }

  /** The API session an access, refresh or ID token names, if it verifies. */
  private sessionOfToken(token: string | undefined, types: string[]): ApiSession | undefined {
    if (!token) return undefined;
    for (const t of types) {
      const c = this.app.keys.verify(token, t);
      if (c && typeof c.z_asid === 'string') {
        const s = this.app.sessions.get(c.z_asid);
        return s && s.identityId === c.sub ? s : undefined;
      }
    }
    return undefined;
  }

  /** `/oidc/revoke` (RFC 7009): ends the token's API session; 200 whatever the token was. */
  async revoke(req: Req): Promise<Reply> {
    const f = parseFields(req);
    // A token that is not valid is answered 200 (RFC 7009); one that is missing is a bad request.
    if (typeof f.token !== 'string' || f.token === '') throw new OAuthError('invalid_request', 'token is required');
    const s = this.sessionOfToken(f.token, [ACCESS_TOKEN, REFRESH_TOKEN]);
    if (s) await this.app.sessions.delete(s.id);
    return { status: 200, body: '', contentType: 'text/plain' };
  }

  /**
   * `/oidc/oauth/introspect` (RFC 7662) for the holder of a token: whether it is still good — an
   * access token while its API session lives, a refresh token while it is its family's current
   * one — with its claims; `{active: false}` for anything else. Upstream routes it but refuses
   * every public client (it asks for a client secret); answering it tells a token's holder no
   * more than using the token would.
   */
  introspect(req: Req): Reply {
    const f = parseFields(req);
    if (typeof f.token !== 'string' || f.token === '') throw new OAuthError('invalid_request', 'token is required');
    const hint = str(f.token_type_hint);
    const types = hint === 'refresh_token' ? [REFRESH_TOKEN, ACCESS_TOKEN] : [ACCESS_TOKEN, REFRESH_TOKEN];
    const NO_STORE = { 'cache-control': 'no-store' };
    for (const type of types) {
      const c = this.app.keys.verify(f.token, type);
      if (!c || typeof c.z_asid !== 'string') continue;
      const s = this.app.sessions.get(c.z_asid);
      const live = s?.oidc !== undefined && s.identityId === c.sub && (type === ACCESS_TOKEN || s.oidc.refreshJti === c.jti);
      if (!live) break;
      const aud = Array.isArray(c.aud) ? c.aud : [c.aud];
      return {
        status: 200,
        headers: NO_STORE,
        body: {
          active: true, token_type: type === ACCESS_TOKEN ? 'Bearer' : 'refresh_token', client_id: s.oidc!.clientId, scope: s.oidc!.scopes.join(' '),
          sub: c.sub, aud, iss: c.iss, exp: c.exp, iat: c.iat, jti: c.jti, z_asid: c.z_asid,
        },
      };
    }
    return { status: 200, headers: NO_STORE, body: { active: false } };
  }

  /** `/oidc/end_session`: ends the API session of `id_token_hint`, then back to a registered logout URI. */
  async endSession(req: Req, origin?: string): Promise<Reply> {
    const f = req.method === 'post' ? parseFields(req) : Object.fromEntries(req.query);
    const s = this.sessionOfToken(str(f.id_token_hint), [ID_TOKEN, ACCESS_TOKEN]);
    const post = str(f.post_logout_redirect_uri);
    if (post && !this.allowed('postLogoutUris', post) && !this.ownConsole('postLogoutUris', post, origin))
      throw new OAuthError('invalid_request', 'post_logout_redirect_uri is not registered in the controller settings');
    if (s) await this.app.sessions.delete(s.id);
    if (post) return this.redirect(post, { state: str(f.state) });
    return { status: 200, body: { ended: s !== undefined } };
  }

  /** `/oidc/userinfo`: the Bearer access token's subject. */
  userinfo(req: Req): Reply {
    const auth = req.headers['authorization'] ?? '';
    const token = /^bearer\s+(\S+)$/i.exec(auth.trim())?.[1];
    const s = token ? this.app.sessions.resolve(token, req) : undefined;
    if (!s || !s.oidc) throw new OAuthError('invalid_token', 'a valid access token is required', 401);
    const identity = this.app.sessions.identityOf(s);
    return { status: 200, body: { sub: s.identityId, name: identity?.name } };
  }
}
