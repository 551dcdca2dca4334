/**
 * TOTP MFA end to end against the real controller, with real codes computed from the secret the
 * controller hands out (otplib, RFC 6238): enrollment, QR code, verification, partial sessions,
 * `authenticate/mfa`, recovery codes (single use, regeneration), TOTP tokens, self-service and
 * administrator removal, and an auth policy that requires TOTP.
 */
import t from 'tap';
import { generateSync } from 'otplib';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { emptyOk } from './helpers/assert.js';
import { createUser } from './helpers/users.js';
import { oidcAccessTokenWithTotp } from './helpers/oidc.js';

let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

const now = () => Math.floor(Date.now() / 1000);
const code = (secret: string) => generateSync({ secret, epoch: now() });
/** A 6-digit code that is valid at no step near now. */
function wrongCode(secret: string): string {
  const valid = new Set<string>();
  for (let d = -150; d <= 150; d += 30) valid.add(generateSync({ secret, epoch: now() + d }));
  for (let i = 0; ; i++) {
    const c = String(123456 + i * 7919).padStart(6, '0').slice(-6);
    if (!valid.has(c)) return c;
  }
}

async function userLogin(name: string, password: string): Promise<{ c: Client; data: any }> {
  const c = srv.client;
  const r = await c.post('/authenticate?method=password', { username: name, password });
  if (r.status !== 200) throw new Error(`login ${name}: ${r.status} ${r.text}`);
  const client = new (c.constructor as any)(srv, '/edge/client/v1', r.body.data.token) as Client;
  return { c: client, data: r.body.data };
}

/** The same session on the Management API. */
const onMgmt = (c: Client): Client => new (c.constructor as any)(srv, '/edge/management/v1', c.token) as Client;

t.test('full MFA flow with real TOTP codes', async (t) => {
  const id = await createUser(admin, 'mfa-user', 'mfa-password-1');
  const { c: u } = await userLogin('mfa-user', 'mfa-password-1');

  // --- not enrolled
  t.ok(isError(await u.get('/current-identity/mfa'), 404, 'NOT_FOUND'), 'detail before enrollment → 404');
  t.ok(isError(await u.delete('/current-identity/mfa'), 404, 'NOT_FOUND'), 'delete before enrollment → 404');
  t.ok(isError(await u.post('/current-identity/mfa/verify', { code: '123456' }), 404, 'NOT_FOUND'), 'verify before enrollment → 404');
  t.ok(isError(await u.get('/current-identity/mfa/qr-code'), 404, 'NOT_FOUND'), 'qr-code before enrollment → 404');
  t.ok(isError(await u.get('/current-identity/mfa/recovery-codes'), 404, 'NOT_FOUND'), 'recovery codes before enrollment → 404');
  t.ok(isError(await u.post('/current-identity/mfa/recovery-codes', { code: '123456' }), 404, 'NOT_FOUND'), 'regenerate before enrollment → 404');
  t.ok(isError(await u.post('/authenticate/mfa', { code: '123456' }), 409, 'MFA_NOT_ENROLLED'), 'authenticate/mfa without MFA → 409');
  t.same((await u.get('/current-api-session')).body.data.authQueries, [], 'no auth queries');
  t.equal((await admin.get(`/identities/${id}`)).body.data.isMfaEnabled, false, 'admin view: isMfaEnabled false');

  // --- enrollment
  const en = await u.post('/current-identity/mfa');
  t.equal(en.status, 201, `enroll → 201 (${en.text})`);
  t.type(en.body?.data?.id, 'string', 'enroll returns an id');
  t.equal(en.body?.data?._links?.self?.href, './current-identity/mfa', 'enroll self link');
  t.ok(isError(await u.post('/current-identity/mfa'), 409, 'MFA_EXISTS'), 'second enroll → 409 MFA_EXISTS');

  const d = (await u.get('/current-identity/mfa')).body.data;
  t.equal(d.isVerified, false, 'unverified');
  t.equal(d.id, en.body.data.id, 'same record');
  t.equal(d.recoveryCodes.length, 20, '20 recovery codes');
  t.equal(new Set(d.recoveryCodes).size, 20, 'distinct recovery codes');
  for (const rc of d.recoveryCodes) t.match(rc, /^[A-Z2-7]{6}$/, 'recovery code is 6 base32 characters');
  const m = /^otpauth:\/\/totp\/([^:]+):mfa-user\?secret=([A-Z2-7]+)&issuer=([^&]+)$/.exec(d.provisioningUrl);
  t.ok(m, `provisioning URL shape: ${d.provisioningUrl}`);
  t.equal(m?.[1], m?.[3], 'issuer in label and parameter');
  t.equal(m?.[1], '127.0.0.1', 'issuer is the advertised host');
  const secret = m![2];
  t.ok(secret.length >= 16, 'secret at least 80 bits');

  const qr = await u.get('/current-identity/mfa/qr-code');
  t.equal(qr.status, 200, 'qr-code → 200');
  t.match(String(qr.headers['content-type']), /^image\/png/, 'content type image/png');
  const raw = await new Promise<Buffer>((resolve, reject) => {
    // Re-fetch as bytes: text decoding mangles binary.
    import('node:https').then(({ default: https }) => {
      https.get({ host: '127.0.0.1', port: srv.port, path: '/edge/client/v1/current-identity/mfa/qr-code', agent: srv.agent, headers: { 'zt-session': u.token! } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (ch) => chunks.push(ch));
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
      });
    }, reject);
  });
  t.ok(raw.length > 100, 'png body');
  t.same([...raw.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  t.equal(raw.subarray(12, 16).toString('latin1'), 'IHDR', 'IHDR chunk');
  t.equal(raw.readUInt32BE(16), 256, 'width 256');
  t.equal(raw.readUInt32BE(20), 256, 'height 256');

  t.ok(isError(await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': code(secret) } }), 404, 'NOT_FOUND'), 'recovery codes while unverified → 404');
  t.equal((await admin.get(`/identities/${id}`)).body.data.isMfaEnabled, false, 'admin view while unverified: false');

  // A login while enrollment is unverified is fully authenticated.
  const early = await userLogin('mfa-user', 'mfa-password-1');
  t.same(early.data.authQueries, [], 'unverified enrollment: no auth queries at login');
  t.equal((await early.c.get('/current-identity/authenticators')).status, 200, 'unverified enrollment: full access');

  // --- verification
  t.ok(isError(await u.post('/current-identity/mfa/verify', {}), 400, 'COULD_NOT_VALIDATE'), 'verify without code → 400 COULD_NOT_VALIDATE');
  t.ok(isError(await u.post('/current-identity/mfa/verify', { code: '' }), 400, 'MFA_INVALID_TOKEN'), 'empty code → 400 MFA_INVALID_TOKEN');
  t.ok(isError(await u.post('/current-identity/mfa/verify', { code: wrongCode(secret) }), 400, 'MFA_INVALID_TOKEN'), 'wrong code → 400');
  t.ok(isError(await u.post('/current-identity/mfa/verify', { code: d.recoveryCodes[0] }), 400, 'MFA_INVALID_TOKEN'), 'recovery code cannot verify → 400');
  emptyOk(t, await u.post('/current-identity/mfa/verify', { code: code(secret) }), 'verify with TOTP');
  const cs = (await u.get('/current-api-session')).body.data;
  t.equal(cs.isMfaRequired, true, 'verifying session: isMfaRequired');
  t.equal(cs.isMfaComplete, true, 'verifying session: isMfaComplete');
  t.ok(isError(await u.post('/current-identity/mfa/verify', { code: code(secret) }), 404, 'NOT_FOUND'), 'second verify → 404');
  t.ok(isError(await u.get('/current-identity/mfa/qr-code'), 404, 'NOT_FOUND'), 'qr-code after verification → 404');
  const dv = (await u.get('/current-identity/mfa')).body.data;
  t.equal(dv.isVerified, true, 'verified');
  t.equal(dv.recoveryCodes, null, 'recovery codes no longer shown');
  t.notOk('provisioningUrl' in dv, 'no provisioning URL once verified');
  t.equal((await admin.get(`/identities/${id}`)).body.data.isMfaEnabled, true, 'admin view: isMfaEnabled true');
  t.equal((await early.c.get('/current-identity/authenticators')).status, 200, 'sessions created before verification stay usable');

  // --- viewing recovery codes needs a TOTP code (body or header)
  t.ok(isError(await u.get('/current-identity/mfa/recovery-codes'), 400, 'MFA_INVALID_TOKEN'), 'view without code → 400');
  t.ok(isError(await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': wrongCode(secret) } }), 400, 'MFA_INVALID_TOKEN'), 'view with wrong code → 400');
  t.ok(isError(await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': d.recoveryCodes[0] } }), 400, 'MFA_INVALID_TOKEN'), 'view with a recovery code → 400');
  const view = await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': code(secret) } });
  t.equal(view.status, 200, `view with TOTP header → 200 ${view.text.slice(0, 100)}`);
  t.same(view.body.data.recoveryCodes, d.recoveryCodes, 'same 20 codes');
  const viewBody = await u.request('GET', '/current-identity/mfa/recovery-codes', { code: code(secret) });
  t.equal(viewBody.status, 200, 'view with TOTP in the body → 200');

  // --- login with MFA: partial session until authenticate/mfa
  const { c: p, data: pd } = await userLogin('mfa-user', 'mfa-password-1');
  t.equal(pd.isMfaRequired, true, 'login: isMfaRequired');
  t.equal(pd.isMfaComplete, false, 'login: isMfaComplete false');
  t.equal(pd.authQueries.length, 1, 'one auth query');
  t.same(pd.authQueries[0], {
    typeId: 'MFA', provider: 'mesh', format: 'alphaNumeric', httpMethod: 'POST', httpUrl: './authenticate/mfa',
    minLength: 4, maxLength: 6, isTotpEnrolled: true,
  }, 'MFA auth query');
  t.ok(isError(await p.get('/current-identity/authenticators'), 401, 'UNAUTHORIZED'), 'partial: client authenticators → 401');
  t.ok(isError(await onMgmt(p).get('/current-identity/authenticators'), 401, 'UNAUTHORIZED'), 'partial: management current-identity authenticators → 401');
  t.ok(isError(await p.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': code(secret) } }), 401, 'UNAUTHORIZED'), 'partial: recovery codes → 401');
  t.equal((await p.get('/current-api-session')).status, 200, 'partial: current-api-session allowed');
  t.equal((await p.get('/current-identity/mfa')).status, 200, 'partial: mfa detail allowed');
  t.ok(isError(await p.get('/current-identity'), 401, 'UNAUTHORIZED'), 'partial: current-identity → 401');
  t.ok(isError(await onMgmt(p).get('/current-identity'), 401, 'UNAUTHORIZED'), 'partial: management current-identity → 401');
  t.ok(isError(await p.delete('/current-identity/mfa', undefined, { headers: { 'mfa-validation-code': code(secret) } }), 401, 'UNAUTHORIZED'), 'partial: removing MFA → 401');
  t.equal((await p.get('/current-identity/mfa/qr-code')).status, 404, 'partial: qr-code answers (404 once verified)');
  t.ok(isError(await p.post('/authenticate/mfa', { code: '' }), 400, 'MFA_INVALID_TOKEN'), 'authenticate/mfa empty → 400');
  t.ok(isError(await p.post('/authenticate/mfa', { code: wrongCode(secret) }), 400, 'MFA_INVALID_TOKEN'), 'authenticate/mfa wrong → 400');
  t.ok(isError(await p.post('/authenticate/mfa', {}), 400, 'COULD_NOT_VALIDATE'), 'authenticate/mfa without code → 400 COULD_NOT_VALIDATE');
  emptyOk(t, await p.post('/authenticate/mfa', { code: code(secret) }), 'authenticate/mfa with TOTP');
  t.equal((await p.get('/current-identity/authenticators')).status, 200, 'after MFA: full access');
  const after = (await p.get('/current-api-session')).body.data;
  t.equal(after.isMfaComplete, true, 'isMfaComplete');
  t.same(after.authQueries, [], 'no auth queries left');

  // --- recovery codes are single use
  const rc = d.recoveryCodes[3];
  const r1 = await userLogin('mfa-user', 'mfa-password-1');
  emptyOk(t, await r1.c.post('/authenticate/mfa', { code: rc.toLowerCase() }), 'recovery code (any case) completes MFA');
  t.equal((await r1.c.get('/current-identity/authenticators')).status, 200, 'full access after recovery code');
  const r2 = await userLogin('mfa-user', 'mfa-password-1');
  t.ok(isError(await r2.c.post('/authenticate/mfa', { code: rc }), 400, 'MFA_INVALID_TOKEN'), 'the same recovery code again → 400');
  const left = await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': code(secret) } });
  t.equal(left.body.data.recoveryCodes.length, 19, '19 codes left');
  t.notOk(left.body.data.recoveryCodes.includes(rc), 'used code gone');

  // --- regeneration replaces all codes
  t.ok(isError(await u.post('/current-identity/mfa/recovery-codes', { code: '' }), 400, 'MFA_INVALID_TOKEN'), 'regenerate with empty code → 400');
  t.ok(isError(await u.post('/current-identity/mfa/recovery-codes', { code: wrongCode(secret) }), 400, 'MFA_INVALID_TOKEN'), 'regenerate with wrong code → 400');
  emptyOk(t, await u.post('/current-identity/mfa/recovery-codes', { code: code(secret) }), 'regenerate with TOTP');
  const fresh = (await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': code(secret) } })).body.data.recoveryCodes as string[];
  t.equal(fresh.length, 20, '20 new codes');
  t.equal(fresh.filter((x) => d.recoveryCodes.includes(x)).length, 0, 'no old code survives');
  const r3 = await userLogin('mfa-user', 'mfa-password-1');
  t.ok(isError(await r3.c.post('/authenticate/mfa', { code: d.recoveryCodes[5] }), 400, 'MFA_INVALID_TOKEN'), 'an old code no longer works');
  emptyOk(t, await r3.c.post('/authenticate/mfa', { code: fresh[0] }), 'a new code works');
  emptyOk(t, await u.post('/current-identity/mfa/recovery-codes', { code: fresh[1] }), 'regenerate with an unused recovery code');

  // --- TOTP token for posture responses: only an OIDC-backed API session may mint one (upstream's rule)
  t.ok(isError(await u.post('/current-api-session/totp-token', { code: code(secret) }), 400, 'INVALID_BACKING_TOKEN_TYPE'), 'totp-token on a zt-session session → 400');
  t.ok(isError(await onMgmt(u).post('/current-api-session/totp-token', { code: code(secret) }), 400, 'INVALID_BACKING_TOKEN_TYPE'), 'likewise on the Management API');
  const access = await oidcAccessTokenWithTotp(srv, 'mfa-user', 'mfa-password-1', () => code(secret));
  const bearer = { headers: { authorization: `Bearer ${access}` } };
  const o = new (u.constructor as any)(srv, '/edge/client/v1') as Client;
  const postBearer = (body: unknown) => o.request('POST', '/current-api-session/totp-token', body, bearer);
  t.ok(isError(await postBearer({ code: '' }), 400, 'MFA_INVALID_TOKEN'), 'totp-token empty code → 400');
  t.ok(isError(await postBearer({ code: wrongCode(secret) }), 400, 'MFA_INVALID_TOKEN'), 'totp-token wrong code → 400');
  const tt = await postBearer({ code: code(secret) });
  t.equal(tt.status, 200, `totp-token on an OIDC session → 200 ${tt.text.slice(0, 200)}`);
  const [, payload] = String(tt.body?.data?.token).split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  t.equal(claims.sub, id, 'token subject is the identity');
  t.equal(claims.z_asid, (await o.get('/current-api-session', bearer)).body.data.id, 'token names the API session');
  t.ok(Math.abs(Date.parse(tt.body.data.issuedAt) - Date.now()) < 60_000, 'issuedAt is now');

  // --- self-service removal needs a code in the header
  t.ok(isError(await u.delete('/current-identity/mfa'), 400, 'MFA_INVALID_TOKEN'), 'delete without code → 400');
  t.ok(isError(await u.delete('/current-identity/mfa', undefined, { headers: { 'mfa-validation-code': '44444' } }), 400, 'MFA_INVALID_TOKEN'), 'delete with bad code → 400');
  emptyOk(t, await u.delete('/current-identity/mfa', undefined, { headers: { 'mfa-validation-code': code(secret) } }), 'delete with TOTP header');
  t.ok(isError(await u.get('/current-identity/mfa'), 404, 'NOT_FOUND'), 'detail after delete → 404');
  t.equal((await admin.get(`/identities/${id}`)).body.data.isMfaEnabled, false, 'admin view: disabled');
  t.equal((await u.get('/current-identity/authenticators')).status, 200, 'the session stays usable after removing MFA');
  const noMfa = await userLogin('mfa-user', 'mfa-password-1');
  t.same(noMfa.data.authQueries, [], 'login after removal: no auth queries');
  t.ok(isError(await postBearer({ code: code(secret) }), 409, 'MFA_NOT_ENROLLED'), 'totp-token without MFA → 409');

  // --- an unverified enrollment is dropped without a code
  t.equal((await u.post('/current-identity/mfa')).status, 201, 'enroll again');
  emptyOk(t, await u.delete('/current-identity/mfa'), 'delete unverified enrollment without code');
  t.ok(isError(await u.get('/current-identity/mfa'), 404, 'NOT_FOUND'), 'gone');
});

t.test('administrator removes MFA', async (t) => {
  const id = await createUser(admin, 'mfa-removed', 'mfa-password-2');
  const other = await createUser(admin, 'mfa-plain', 'mfa-password-3');
  const { c: u } = await userLogin('mfa-removed', 'mfa-password-2');
  t.equal((await u.post('/current-identity/mfa')).status, 201);
  const secret = /secret=([A-Z2-7]+)/.exec((await u.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  emptyOk(t, await u.post('/current-identity/mfa/verify', { code: code(secret) }), 'verified');
  t.equal((await admin.get(`/identities/${id}`)).body.data.isMfaEnabled, true);

  const plain = await srv.login('mfa-plain', 'mfa-password-3');
  t.ok(isError(await plain.delete(`/identities/${id}/mfa`), 401, 'UNAUTHORIZED'), 'non-admin → 401');
  t.ok(isError(await admin.delete('/identities/no-such-identity/mfa'), 404, 'NOT_FOUND'), 'unknown identity → 404');
  emptyOk(t, await admin.delete(`/identities/${id}/mfa`), 'admin removal');
  t.equal((await admin.get(`/identities/${id}`)).body.data.isMfaEnabled, false, 'isMfaEnabled false');
  const again = await userLogin('mfa-removed', 'mfa-password-2');
  t.same(again.data.authQueries, [], 'next login is fully authenticated');
  t.ok(isError(await u.get('/current-identity/mfa'), 404, 'NOT_FOUND'), 'no MFA record left');
  t.ok(other, 'other identity');
});

t.test('auth policy requiring TOTP: enroll during the partial session', async (t) => {
  const pol = await admin.post('/auth-policies', {
    name: 'totp-required',
    primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: true, allowedSigners: [] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: true },
  });
  t.equal(pol.status, 201, `policy created ${pol.text.slice(0, 200)}`);
  await createUser(admin, 'totp-required-user', 'mfa-password-4', { authPolicyId: pol.body.data.id });
  const { c: u, data } = await userLogin('totp-required-user', 'mfa-password-4');
  t.equal(data.isMfaRequired, true, 'isMfaRequired by policy');
  t.equal(data.authQueries.length, 1, 'one auth query');
  t.equal(data.authQueries[0].typeId, 'MFA');
  t.equal(data.authQueries[0].isTotpEnrolled, false, 'not enrolled yet');
  t.ok(isError(await u.get('/current-identity/authenticators'), 401, 'UNAUTHORIZED'), 'partial until TOTP');
  t.ok(isError(await u.post('/authenticate/mfa', { code: '123456' }), 409, 'MFA_NOT_ENROLLED'), 'authenticate/mfa before enrollment → 409');
  t.equal((await u.post('/current-identity/mfa')).status, 201, 'enroll while partial');
  const secret = /secret=([A-Z2-7]+)/.exec((await u.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  t.equal((await u.get('/current-identity/mfa/qr-code')).status, 200, 'qr-code while partial');
  emptyOk(t, await u.post('/current-identity/mfa/verify', { code: code(secret) }), 'verify while partial');
  t.equal((await u.get('/current-identity/authenticators')).status, 200, 'verification completes the session');
  t.same((await u.get('/current-api-session')).body.data.authQueries, [], 'no auth queries');
});

t.test('wrong codes are braked per identity', async (t) => {
  await createUser(admin, 'mfa-brute', 'mfa-password-5');
  const { c: u } = await userLogin('mfa-brute', 'mfa-password-5');
  t.equal((await u.post('/current-identity/mfa')).status, 201);
  const secret = /secret=([A-Z2-7]+)/.exec((await u.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  emptyOk(t, await u.post('/current-identity/mfa/verify', { code: code(secret) }), 'verified');
  const { c: p } = await userLogin('mfa-brute', 'mfa-password-5');
  for (let i = 1; i <= 10; i++) t.ok(isError(await p.post('/authenticate/mfa', { code: wrongCode(secret) }), 400, 'MFA_INVALID_TOKEN'), `wrong code ${i} → 400`);
  t.ok(isError(await p.post('/authenticate/mfa', { code: code(secret) }), 429, 'RATE_LIMITED'), 'then even the right code → 429 RATE_LIMITED');
  t.ok(isError(await p.get('/current-identity/authenticators'), 401, 'UNAUTHORIZED'), 'still partial');
  // Another identity is not affected.
  await createUser(admin, 'mfa-bystander', 'mfa-password-6');
  const { c: b } = await userLogin('mfa-bystander', 'mfa-password-6');
  t.equal((await b.post('/current-identity/mfa')).status, 201, 'bystander enrolls');
  const s2 = /secret=([A-Z2-7]+)/.exec((await b.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  emptyOk(t, await b.post('/current-identity/mfa/verify', { code: code(s2) }), 'bystander verifies');
});
