/**
 * The worker pool for CPU-heavy work (password hashing, CSR signing, searches). Its queue is
 * bounded: when it is full a caller gets 429 RATE_LIMITED at once instead of an unbounded wait.
 * Session-token batches have a thread of their own (`signSessions`), never queued behind them.
 */
import type { KeyObject } from 'node:crypto';
import os from 'node:os';
import { Piscina } from 'piscina';
import { errors } from './core/errors.js';
import type { HashPasswordInput } from './auth/argon2.js';
import type { SessionBatchTask } from './auth/tokens.js';
import type { SearchInput, SearchOutput } from './events/search-docs.js';
import type { SignCsrItem, SignCsrResult, SigningCaPem } from './pki/csr-task.js';
import type { EnrollmentSpec } from './resources/enrollments.js';
import type { EnrollmentRecord } from './store/store.js';

/**
 * A group of new enrollments made in a worker as `newEnrollment` makes them (the bulk import's,
 * src/cli/import.ts): signed with `serverKey` (`kid`), sealed with the key of `pkiDir`.
 */
export interface NewEnrollmentsInput {
  specs: EnrollmentSpec[];
  serverKey: KeyObject;
  kid: string;
  issuer: { url: string; controllers: string[] };
  lifetimeMs: number;
  pkiDir: string;
}

/**
 * The pool's tasks, by name: what each takes and gives. The worker entry (workers/tasks.ts)
 * implements them with the functions of src/ named here; nothing in src/ imports workers/.
 */
export interface Tasks {
  hashPassword(input: HashPasswordInput): Promise<string>;
  verifyPassword(input: { hash: string; password: string }): Promise<boolean>;
  signCsrs(input: { items: SignCsrItem[] }): SignCsrResult[];
  searchDocs(input: SearchInput): SearchOutput;
  newEnrollments(input: NewEnrollmentsInput): EnrollmentRecord[];
}

type TaskName = keyof Tasks;
type TaskInput<N extends TaskName> = Parameters<Tasks[N]>[0];
type TaskOutput<N extends TaskName> = Awaited<ReturnType<Tasks[N]>>;

const TASKS = new URL('../workers/tasks.js', import.meta.url).href;
/** The signing thread loads the token task alone (not argon2, PKI, search). */
const TOKEN_TASKS = new URL('../workers/tokens.js', import.meta.url).href;

export class WorkerPool {
  private readonly piscina: Piscina;
  /** A thread of its own for session-token batches: a session create never waits behind password hashes. */
  private readonly signer: Piscina;
  /** Worker threads, all started at once. */
  readonly threads: number;

  /** `signingCa`: what `signCsrs` signs with, handed to each worker thread once as it starts. */
  constructor(opts: { threads: number; maxQueue: number; signingCa?: { certPem: string; key: KeyObject } }) {
    const threads = (this.threads = opts.threads > 0 ? opts.threads : Math.max(1, os.availableParallelism()));
    const signingCa: SigningCaPem | undefined = opts.signingCa && {
      certPem: opts.signingCa.certPem,
      keyPem: opts.signingCa.key.export({ type: 'pkcs8', format: 'pem' }) as string,
    };
    this.piscina = new Piscina({
      filename: TASKS,
      workerData: { signingCa },
      // Every worker from the start: a worker started on demand (piscina's default is one, more
      // as the queue grows) spends its first moments loading code while the burst that asked for
      // it waits.
      minThreads: threads,
      maxThreads: threads,
      maxQueue: opts.maxQueue,
      idleTimeout: 60_000,
      // Nothing reads piscina's run/wait-time histograms; recording them cost the event loop time
      // per task (token signing sends thousands of tasks a second).
      recordTiming: false,
    });
    this.signer = new Piscina({ filename: TOKEN_TASKS, minThreads: 1, maxThreads: 1, idleTimeout: 60_000, recordTiming: false });
  }

  /** Sign a batch of session tokens (workers/tokens.ts) on the signing thread. */
  signSessions(task: SessionBatchTask): Promise<string> {
    return this.signer.run(task, { name: 'signSessions' });
  }

  async run<N extends TaskName>(name: N, input: TaskInput<N>): Promise<TaskOutput<N>> {
    if (this.piscina.queueSize >= this.piscina.options.maxQueue) throw errors.rateLimited();
    try {
      return await this.piscina.run(input, { name });
    } catch (e) {
      if (e instanceof Error && /queue is at limit/i.test(e.message)) throw errors.rateLimited();
      throw e;
    }
  }

  get queueSize(): number {
    return this.piscina.queueSize;
  }

  async close(): Promise<void> {
    await Promise.all([this.piscina.destroy(), this.signer.destroy()]);
  }
}
