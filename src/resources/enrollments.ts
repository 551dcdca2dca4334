/**
 * Enrollments: outstanding one-time credentials of identities and routers.
 * Created with identities (`enrollment` in the create body), edge/transit routers, `POST
 * /enrollments`, re-enrollment of authenticators and routers; consumed by the enroll endpoints
 * (src/api/handlers/enroll.ts). The JWT names the mutual-TLS listener as the controller (`iss`,
 * `ctrls`): a device that enrolls then logs in with its certificate lands where certificates work.
 */
import crypto from 'node:crypto';
import type { App } from '../core/context.js';
import type { Rec, Tx } from '../store/store.js';
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

/** Give an enrollment a new token, JWT and expiry inside a write (refresh: the old token dies). */
export function refreshEnrollmentInTx(app: App, tx: Tx, e: Rec, expiresAt: number): Rec {
  const token = crypto.randomUUID();
  const subject = e.identityId ?? e.edgeRouterId ?? e.transitRouterId;
  const rec: Rec = { ...e, token, expiresAt, updatedAt: Math.max(Date.now(), e.updatedAt + 1) };
  rec.jwt = enrollmentJwt(app, { method: e.method, token, expiresAt }, subject);
  tx.put('enrollments', rec);
  return rec;
}

/** Outstanding enrollment of `method` for an identity, if any (at most one per method). */
export function identityEnrollment(tx: { idsByIndex(c: string, f: string, v: unknown): string[]; get(c: string, id: string): Rec | undefined }, identityId: string, method: string): Rec | undefined {
  for (const id of tx.idsByIndex('enrollments', 'identityId', identityId)) {
    const e = tx.get('enrollments', id);
    if (e?.method === method) return e;
  }
  return undefined;
}

export function createEnrollmentInTx(app: App, tx: Tx, spec: EnrollmentSpec): Rec {
  const now = Date.now();
  const expiresAt = spec.expiresAt ?? now + app.config.enrollmentMinutes * 60_000;
  const token = crypto.randomUUID();
  const subject = spec.identityId ?? spec.edgeRouterId ?? spec.transitRouterId!;
  const rec: Rec = { id: newId(), createdAt: now, updatedAt: now, tags: {}, ...spec, token, expiresAt };
  rec.jwt = enrollmentJwt(app, { method: spec.method, token, expiresAt }, subject);
  for (const k of Object.keys(rec)) if (rec[k] === undefined) delete rec[k];
  tx.put('enrollments', rec);
  return rec;
}

export const enrollments: ResourceDef = {
  collection: 'enrollments',
  path: 'enrollments',
  family: 'enrollment',
  operations: { list: 'listEnrollments', detail: 'detailEnrollment', delete: 'deleteEnrollment' },
  owner: 'identityId',
  fields: {
    method: { readOnly: true, filter: 'string' },
    token: { readOnly: true, unique: true, filter: 'string', secret: true },
    jwt: { readOnly: true, secret: true },
    // Indexed for the expired-enrollment alert (src/events/alert-expiry.ts): a range read up to now
    // instead of decoding every enrollment each minute. Built at open in older data dirs (store.ts).
    expiresAt: { readOnly: true, datetime: true, filter: 'datetime', index: true },
    identityId: { readOnly: true, filter: 'string', optional: true, ref: { collection: 'identities', onDelete: 'cascade', entityRef: 'identity' } },
    edgeRouterId: { readOnly: true, filter: 'string', optional: true, ref: { collection: 'edgeRouters', onDelete: 'cascade', entityRef: 'edgeRouter' } },
    transitRouterId: { readOnly: true, filter: 'string', optional: true, ref: { collection: 'routers', onDelete: 'cascade', entityRef: 'transitRouter' } },
    caId: { readOnly: true, filter: 'string', ref: { collection: 'cas', onDelete: 'cascade' } },
    username: { readOnly: true, optional: true },
  },
  symbols: {
    identity: { type: 'string', get: (r: Rec) => r.identityId },
    edgeRouter: { type: 'string', get: (r: Rec) => r.edgeRouterId },
    transitRouter: { type: 'string', get: (r: Rec) => r.transitRouterId },
  },
};
