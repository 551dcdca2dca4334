/**
 * Worker side of the enrollment task (src/pool.ts `newEnrollments`): a bulk import's group of
 * enrollments made as a create makes them (`newEnrollment`: token, signed JWT, sealed), off the
 * importing thread. The server key comes with each task; the sealing key is read from the PKI
 * directory once per thread.
 */
import { newEnrollment, type EnrollmentKeys } from '../src/resources/enrollments.js';
import { Sealer } from '../src/store/sealed.js';
import type { EnrollmentRecord } from '../src/store/store.js';
import type { NewEnrollmentsInput } from '../src/pool.js';

const sealers = new Map<string, Sealer>();

export function newEnrollments(input: NewEnrollmentsInput): EnrollmentRecord[] {
  let sealer = sealers.get(input.pkiDir);
  if (!sealer) sealers.set(input.pkiDir, (sealer = Sealer.forPkiDir(input.pkiDir)));
  const keys: EnrollmentKeys = {
    pki: { serverKey: input.serverKey, serverCertSha1Hex: input.kid },
    // newEnrollment reads only the store's sealer.
    store: { sealer },
    issuer: () => input.issuer,
    lifetimeMs: input.lifetimeMs,
  };
  return input.specs.map((spec) => newEnrollment(keys, spec));
}
