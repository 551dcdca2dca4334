/**
 * Enrollments: outstanding one-time credentials of identities and routers.
 * Created with identities (`enrollment` in the create body) and edge/transit routers (their
 * `beforeCreate`), and by the enrollments manager (src/managers/enrollments.ts: `POST
 * /enrollments`, refresh, re-enrollment of authenticators and routers), which also consumes them
 * in the enroll flows. The JWT names the mutual-TLS listener as the controller (`iss`, `ctrls`): a
 * device that enrolls then logs in with its certificate lands where certificates work.
 */
import crypto from 'node:crypto';
import type { ResourceApp as App } from './context.js';
import type { Pki } from '../pki/bootstrap.js';
import type { EnrollmentRecord, Rec, Store, Tx } from '../store/store.js';
import { digestOf } from '../store/sealed.js';
import { REDACTED } from './render.js';
import { signJwt } from '../pki/jwt.js';
import { timeOrderedId } from '../store/ids.js';
import type { EnrollmentKeys, ResourceDef, WriteCtx, Writer } from './types.js';

export type { EnrollmentKeys };

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

/** Where an application's enrollment JWTs send a device (`EnrollmentKeys.issuer`). */
export function issuerOf(app: App): { url: string; controllers: string[] } {
  return { url: app.certBaseUrl, controllers: app.cluster?.members().map((m) => m.certBaseUrl) ?? [app.certBaseUrl] };
}

/** The keys of an application: for records created through the resource layer. */
export function keysOf(app: App): EnrollmentKeys {
  return { pki: app.pki, store: app.store, issuer: () => issuerOf(app), lifetimeMs: app.config.enrollmentMinutes * 60_000 };
}

/** A JWT signed with the controller's server key (`kid`: its certificate's SHA-1). */
export function signedJwt(keys: EnrollmentKeys, claims: Record<string, unknown>): string {
  return signJwt(keys.pki.serverKey, keys.pki.serverCertSha1Hex, claims);
}

function enrollmentJwt(keys: EnrollmentKeys, e: { method: string; token: string; expiresAt: number }, subject: string): string {
  const { url, controllers } = keys.issuer();
  return signedJwt(keys, { em: e.method, sub: subject, jti: e.token, iss: url, aud: [''], exp: Math.floor(e.expiresAt / 1000), ctrls: controllers });
}

/**
 * A new token, its JWT and expiry as stored: the token's digest (what `enrollmentByToken` looks
 * up) and the JWT sealed; the token itself is the JWT's `jti`, so it is read back from the opened
 * JWT. Signed and sealed here, before the write that stores it: a write callback only stores.
 */
export function enrollmentSecretsAtRest(keys: EnrollmentKeys, method: string, subject: string, expiresAt: number): { token: string; jwt: string; expiresAt: number } {
  const token = crypto.randomUUID();
  const jwt = enrollmentJwt(keys, { method, token, expiresAt }, subject);
  return { token: digestOf(token), jwt: keys.store.sealer.seal(jwt), expiresAt };
}

const subjectOf = (e: EnrollmentSpec | EnrollmentRecord): string => (e.identityId ?? e.edgeRouterId ?? e.transitRouterId)!;

/** A new enrollment record, ready to be put by a write (nothing in it is signed or sealed inside the write). */
export function newEnrollment(keys: EnrollmentKeys, spec: EnrollmentSpec): EnrollmentRecord {
  const now = Date.now();
  const rec: EnrollmentRecord = { id: timeOrderedId(), createdAt: now, updatedAt: now, tags: {}, ...spec, ...enrollmentSecretsAtRest(keys, spec.method, subjectOf(spec), spec.expiresAt ?? now + keys.lifetimeMs) };
  for (const [k, v] of Object.entries(rec)) if (v === undefined) delete (rec as Rec)[k];
  return rec;
}

/**
 * Put the enrollment a create gives its new record: the one `beforeCreate` made before the write
 * (`wctx.prepared`) when it is for this record. Writers that run the declaration's hooks inside
 * their own write (the model generator) or choose the id inside it (fabric's createRouter) get one
 * made here.
 */
export function putNewEnrollment(wctx: WriteCtx, spec: EnrollmentSpec): void {
  const pre = wctx.prepared as EnrollmentRecord | undefined;
  const fits = pre && pre.method === spec.method && subjectOf(pre) === subjectOf(spec) && pre.caId === spec.caId && pre.username === spec.username;
  wctx.tx.put('enrollments', fits ? pre : newEnrollment(enrollmentKeysOf(wctx.writer), spec));
}

/** The writer's enrollment keys: a writer that creates identities or routers must have them. */
export function enrollmentKeysOf(writer: Writer): EnrollmentKeys {
  if (!writer.enrollments) throw new Error('this write makes an enrollment, and its writer has no enrollment keys');
  return writer.enrollments;
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

/** Outstanding enrollment of `method` for an identity, if any (at most one per method). */
export function identityEnrollment(tx: Store | Tx, identityId: string, method: string): EnrollmentRecord | undefined {
  for (const id of tx.idsByIndex('enrollments', 'identityId', identityId)) {
    const e = tx.get('enrollments', id);
    if (e?.method === method) return e;
  }
  return undefined;
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
