/**
 * Signing CSRs for the API: runs `signCsrs` (csr-task.ts: parse, verify, issue) in the worker
 * pool and turns an unusable CSR into 400 COULD_NOT_PROCESS_CSR (or the code the caller names).
 * The CSRs of all requests that get here in one turn of the event loop travel in one pool task
 * (see CsrBatch); each request still gets only its own results.
 *
 *   const [client, server] = await signCsrs(app, [{ csr, profile: 'client' }, { csr: s, profile: 'server' }]);
 */
import { ApiError, type ErrorCode } from '../core/errors.js';
import type { CertProfile } from './cert-issuer.js';
import type { SignCsrItem, SignCsrResult } from './csr-task.js';
import type { Pki } from './bootstrap.js';

/**
 * What signing needs of the application: the PKI and a worker pool that runs `signCsrs`. The
 * pool (src/pool.ts) lies above this layer: the composition passes it in as this.
 */
export interface CsrSigningApp {
  pki: Pki;
  pool: { run(task: 'signCsrs', input: { items: SignCsrItem[] }): Promise<SignCsrResult[]> };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Validity of issued certificates by use. */
export const VALIDITY = {
  /** Identity client certificates (ott enrollment, extension). */
  client: 365 * DAY_MS,
  /** Router client and server certificates (erott/trott, router extension). */
  router: 365 * DAY_MS,
  /** Ephemeral certificates of an API session. */
  apiSession: 12 * 60 * 60 * 1000,
} as const;

export interface SignRequest {
  csr: unknown;
  profile: CertProfile;
  validityMs?: number;
  /** Body field named in the error cause. */
  field?: string;
}

export interface Signed {
  pem: string;
  fingerprint: string;
  notBefore: number;
  notAfter: number;
  commonName: string;
}

export async function signCsrs(app: CsrSigningApp, reqs: SignRequest[], code: ErrorCode = 'COULD_NOT_PROCESS_CSR'): Promise<Signed[]> {
  for (const r of reqs) {
    if (typeof r.csr !== 'string' || r.csr.trim() === '')
      throw new ApiError(code, undefined, { field: r.field ?? 'csr', reason: 'a PEM encoded certificate signing request is required', value: '' });
  }
  const items = reqs.map((r) => ({ csr: r.csr as string, profile: r.profile, validityMs: r.validityMs ?? VALIDITY.client }));
  const out = await batchFor(app).sign(items);
  return out.map((res, i) => {
    if (!res.ok) throw new ApiError(code, undefined, { field: reqs[i].field ?? 'csr', reason: res.reason, value: '' });
    return res;
  });
}

/**
 * Most CSRs in one pool task. One task per CSR cost more CPU per enrollment (main thread and
 * worker, wake-ups included) than signing inline on a 2-core machine, more than the CSR itself
 * (docs/pki.md). So the CSRs of every request that reaches this point in one turn of the event
 * loop share a task; past 16 (milliseconds of one worker) a burst becomes several tasks, so that
 * both workers take part.
 */
const MAX_BATCH = 16;

interface Waiting {
  items: SignCsrItem[];
  resolve: (out: SignCsrResult[]) => void;
  reject: (e: unknown) => void;
}

/** CSRs waiting for the next pool task, per app. */
class CsrBatch {
  private waiting: Waiting[] = [];
  private scheduled = false;

  constructor(private readonly app: CsrSigningApp) {}

  sign(items: SignCsrItem[]): Promise<SignCsrResult[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ items, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush() {
    this.scheduled = false;
    const waiting = this.waiting.splice(0);
    for (let i = 0; i < waiting.length; ) {
      const group: Waiting[] = [];
      let n = 0;
      while (i < waiting.length && (n === 0 || n + waiting[i].items.length <= MAX_BATCH)) {
        n += waiting[i].items.length;
        group.push(waiting[i++]);
      }
      this.run(group);
    }
  }

  private run(group: Waiting[]) {
    const items = group.length === 1 ? group[0].items : group.flatMap((w) => w.items);
    this.app.pool.run('signCsrs', { items }).then(
      (out) => {
        let at = 0;
        for (const w of group) {
          w.resolve(out.slice(at, at + w.items.length));
          at += w.items.length;
        }
      },
      // A full pool queue (429) or a failed worker fails every request of the task.
      (e) => {
        for (const w of group) w.reject(e);
      },
    );
  }
}

const batches = new WeakMap<CsrSigningApp, CsrBatch>();

function batchFor(app: CsrSigningApp): CsrBatch {
  let b = batches.get(app);
  if (!b) {
    b = new CsrBatch(app);
    batches.set(app, b);
  }
  return b;
}

/** The chain returned with issued client certificates: leaf + signing CA. */
export function withChain(app: { pki: Pki }, leafPem: string): string {
  return leafPem + app.pki.signingCertPem;
}
