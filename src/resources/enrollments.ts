/**
 * Enrollments: outstanding one-time credentials of identities and routers.
 * Created with identities (`enrollment` in the create body), edge/transit routers, `POST
 * /enrollments`, re-enrollment of authenticators and routers; consumed by the enroll endpoints
 * (src/api/handlers/enroll.ts). The JWT names the mutual-TLS listener as the controller (`iss`,
 * `ctrls`): a device that enrolls then logs in with its certificate lands where certificates work.
 */
import crypto from 'node:crypto';
import type { App } from '../core/context.js';
import type { EnrollmentRecord, Rec, Store, Tx } from '../store/store.js';
import { digestOf } from '../store/sealed.js';
import { REDACTED } from './render.js';
import { signJwt } from '../pki/jwt.js';
import { newId } from './write.js';
import type { ResourceDef } from './types.js';

export type EnrollmentMethod = 'ott' | 'ottca' | 'updb' | 'erott' | 'trott';

export interface EnrollmentSpec {
  method: EnrollmentMethod;
  identityId?: string;
  edgeRouterId?: string;
  transitRouterId?: string;
  caId?: string;
  username?: string;
  expiresAt?: number;
}

export function enrollmentJwt(app: App, e: { method: string; token: string; expiresAt: number }, subject: string): string {
  return signJwt(app.pki.serverKey, app.pki.serverCertSha1Hex, {
    em: e.method,
    sub: subject,
    jti: e.token,
    iss: app.certBaseUrl,
    aud: [''],
    exp: Math.floor(e.expiresAt / 1000),
    ctrls: app.cluster?.members().map((m) => m.certBaseUrl) ?? [app.certBaseUrl],
  });
}

/**
 * At rest an enrollment holds its token's digest (what `enrollmentByToken` looks up) and its JWT
 * sealed; the token itself is the JWT's `jti`, so it is read back from the opened JWT.
 */
function atRest(app: App, token: string, jwt: string): { token: string; jwt: string } {
  return { token: digestOf(token), jwt: app.store.sealer.seal(jwt) };
}

/** The enrollment whose token is `token`, if any. */
export function enrollmentByToken(store: Store, token: string): EnrollmentRecord | undefined {
  return store.findUnique('enrollments', 'token', digestOf(token));
}

/** An enrollment's token and JWT as handed out (opened; REDACTED for a caller who may not hold them). */
export function enrollmentSecrets(store: Store, e: EnrollmentRecord, secrets: boolean): { token: string; jwt: string } {
  if (!secrets) return { token: REDACTED, jwt: REDACTED };
  const jwt = store.sealer.open(e.jwt);
  let token: unknown;
  try {
    token = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')).jti;
  } catch {
    token = undefined;
  }
  return { token: typeof token === 'string' ? token : REDACTED, jwt };
}

/** Give an enrollment a new token, JWT and expiry inside a write (refresh: the old token dies). */
export function refreshEnrollmentInTx(app: App, tx: Tx, e: EnrollmentRecord, expiresAt: number): EnrollmentRecord {
  const token = crypto.randomUUID();
  const subject = (e.identityId ?? e.edgeRouterId ?? e.transitRouterId)!;
  const rec: EnrollmentRecord = { ...e, expiresAt, updatedAt: Math.max(Date.now(), e.updatedAt + 1), ...atRest(app, token, enrollmentJwt(app, { method: e.method, token, expiresAt }, subject)) };
  tx.put('enrollments', rec);
  return rec;
}

/** Outstanding enrollment of `method` for an identity, if any (at most one per method). */
export function identityEnrollment(tx: Store | Tx, identityId: string, method: string): EnrollmentRecord | undefined {
  for (const id of tx.idsByIndex('enrollments', 'identityId', identityId)) {
    const e = tx.get('enrollments', id);
    if (e?.method === method) return e;
  }
  return undefined;
}

export function createEnrollmentInTx(app: App, tx: Tx, spec: EnrollmentSpec): EnrollmentRecord {
  const now = Date.now();
  const expiresAt = spec.expiresAt ?? now + app.config.enrollmentMinutes * 60_000;
  const token = crypto.randomUUID();
  const subject = spec.identityId ?? spec.edgeRouterId ?? spec.transitRouterId!;
  const rec: EnrollmentRecord = { id: newId(), createdAt: now, updatedAt: now, tags: {}, ...spec, expiresAt, ...atRest(app, token, enrollmentJwt(app, { method: spec.method, token, expiresAt }, subject)) };
  for (const [k, v] of Object.entries(rec)) if (v === undefined) delete (rec as Rec)[k];
  tx.put('enrollments', rec);
  return rec;
}

export const enrollments: ResourceDef<'enrollments'> = {
  collection: 'enrollments',
  path: 'enrollments',
  family: 'enrollment',
  operations: { list: 'listEnrollments', detail: 'detailEnrollment', delete: 'deleteEnrollment' },
  owner: 'identityId',
  fields: {
    method: { readOnly: true, filter: 'string' },
    // Stored as the token's digest and the sealed JWT; rendered opened by `render` below.
    token: { readOnly: true, unique: true, hidden: true },
    jwt: { readOnly: true, hidden: true },
    // Indexed for the expired-enrollment alert (src/events/alert-expiry.ts): a range read up to now
    // instead of decoding every enrollment each minute. Built at open in older data dirs (store.ts).
    expiresAt: { readOnly: true, datetime: true, filter: 'datetime', index: true },
    identityId: { readOnly: true, filter: 'string', optional: true, ref: { collection: 'identities', onDelete: 'cascade', entityRef: 'identity' } },
    edgeRouterId: { readOnly: true, filter: 'string', optional: true, ref: { collection: 'edgeRouters', onDelete: 'cascade', entityRef: 'edgeRouter' } },
    transitRouterId: { readOnly: true, filter: 'string', optional: true, ref: { collection: 'routers', onDelete: 'cascade', entityRef: 'transitRouter' } },
    caId: { readOnly: true, filter: 'string', ref: { collection: 'cas', onDelete: 'cascade' } },
    username: { readOnly: true, optional: true },
  },
  rendersSecrets: true,
  render: (rec, { store }, secrets) => enrollmentSecrets(store, rec, secrets),
  symbols: {
    identity: { type: 'string', get: (r: Rec) => r.identityId },
    edgeRouter: { type: 'string', get: (r: Rec) => r.edgeRouterId },
    transitRouter: { type: 'string', get: (r: Rec) => r.transitRouterId },
  },
};
