/**
 * Posture data and posture check evaluation. Data is volatile, in memory:
 * OS, domain, MAC and process reports per identity (shared by all its API sessions); MFA passes
 * and endpoint state (woken/unlocked) per API session.
 *
 * Example:
 *   posture.report('I1', 'A1', { id: 'D1', typeId: 'DOMAIN', domain: 'corp' });
 *   posture.evaluate(check, 'I1', 'A1', identityRec).passing // → true when `corp` is listed
 */
import type { Rec, IdentityRecord } from '../store/store.js';
import { satisfies } from './version-range.js';

/** Grace window after a wake/unlock during which an MFA check with prompts keeps passing. */
const PROMPT_GRACE_SECONDS = 300;

interface Stamp {
  postureCheckId: string;
  at: number;
}
interface ProcessData extends Stamp {
  path: string;
  isRunning: boolean;
  hash: string;
  signerFingerprints: string[];
}
export interface IdentityPosture {
  os?: Stamp & { type: string; version: string; build: string };
  domain?: Stamp & { domain: string };
  mac?: Stamp & { addresses: string[] };
  /** `<checkId>\0<path lower-case>` → report. */
  processes: Map<string, ProcessData>;
}
export interface SessionPosture {
  passedMfaAt?: number;
  wokenAt?: number;
  unlockedAt?: number;
}

export interface CheckResult {
  passing: boolean;
  /** Seconds; -1 = no timeout. */
  timeout: number;
  /** Seconds; -1 = none, 0 = expired. */
  timeoutRemaining: number;
  timeoutAt: number | null;
  /** When the result's inputs last changed (ms). */
  updatedAt: number;
  actual?: unknown;
  expected?: unknown;
}

export interface PostureReport {
  id: string;
  typeId: string;
  [field: string]: unknown;
}

const lower = (s: unknown) => (typeof s === 'string' ? s.toLowerCase() : '');
/** A MAC address as upstream stores and compares it: lower case, everything but hex digits dropped. */
export const normMac = (s: unknown) => lower(s).replace(/[^0-9a-f]/g, '');

export class PostureStore {
  readonly identities = new Map<string, IdentityPosture>();
  readonly sessions = new Map<string, SessionPosture>();

  identity(id: string): IdentityPosture {
    let p = this.identities.get(id);
    if (!p) this.identities.set(id, (p = { processes: new Map() }));
    return p;
  }

  session(apiSessionId: string): SessionPosture {
    let p = this.sessions.get(apiSessionId);
    if (!p) this.sessions.set(apiSessionId, (p = {}));
    return p;
  }

  /** Store one posture response. Returns true when something about the caller changed. */
  report(identityId: string, apiSessionId: string, r: PostureReport, now = Date.now()): boolean {
    const id = String(r.id ?? '');
    switch (r.typeId) {
      case 'DOMAIN':
        this.identity(identityId).domain = { postureCheckId: id, at: now, domain: String(r.domain ?? '') };
        return true;
      case 'MAC':
        this.identity(identityId).mac = {
          postureCheckId: id,
          at: now,
          addresses: Array.isArray(r.macAddresses) ? r.macAddresses.filter((x): x is string => typeof x === 'string') : [],
        };
        return true;
      case 'OS':
        this.identity(identityId).os = { postureCheckId: id, at: now, type: String(r.type ?? ''), version: String(r.version ?? ''), build: String(r.build ?? '') };
        return true;
      case 'PROCESS':
      case 'PROCESS_MULTI': {
        const path = String(r.path ?? '');
        this.identity(identityId).processes.set(`${id}\u0000${path.toLowerCase()}`, {
          postureCheckId: id,
          at: now,
          path,
          isRunning: r.isRunning === true,
          hash: String(r.hash ?? ''),
          signerFingerprints: Array.isArray(r.signerFingerprints) ? r.signerFingerprints.filter((x): x is string => typeof x === 'string') : [],
        });
        return true;
      }
      case 'ENDPOINT_STATE': {
        const s = this.session(apiSessionId);
        if (r.woken === true) s.wokenAt = now;
        if (r.unlocked === true) s.unlockedAt = now;
        return r.woken === true || r.unlocked === true;
      }
      default:
        return false;
    }
  }

  private process(identityId: string, checkId: string, path: string): ProcessData | undefined {
    const procs = this.identities.get(identityId)?.processes;
    if (!procs) return undefined;
    const exact = procs.get(`${checkId}\u0000${path.toLowerCase()}`);
    if (exact) return exact;
    // Clients may report a process under another check id; the path is what identifies it.
    let best: ProcessData | undefined;
    for (const p of procs.values()) if (p.path.toLowerCase() === path.toLowerCase() && (!best || p.at > best.at)) best = p;
    return best;
  }

  /** Evaluate one posture check for an identity's API session. */
  evaluate(check: Rec, identityId: string, apiSessionId: string, identity: IdentityRecord | undefined, now = Date.now()): CheckResult {
    const base: CheckResult = { passing: false, timeout: -1, timeoutRemaining: -1, timeoutAt: null, updatedAt: check.updatedAt };
    const data = this.identities.get(identityId);
    switch (check.typeId) {
      case 'DOMAIN': {
        const d = data?.domain;
        const expected = (check.domains as string[]) ?? [];
        return { ...base, passing: !!d && expected.some((x) => lower(x) === lower(d.domain)), actual: d?.domain ?? '', expected, updatedAt: Math.max(check.updatedAt, d?.at ?? 0) };
      }
      case 'MAC': {
        const m = data?.mac;
        const expected = ((check.macAddresses as string[]) ?? []).map(normMac);
        const actual = m?.addresses ?? [];
        return { ...base, passing: actual.some((a) => expected.includes(normMac(a))), actual, expected: check.macAddresses, updatedAt: Math.max(check.updatedAt, m?.at ?? 0) };
      }
      case 'OS': {
        const o = data?.os;
        const list = (check.operatingSystems as { type: string; versions?: string[] }[]) ?? [];
        const passing =
          !!o &&
          list.some((e) => lower(e.type) === lower(o.type) && (!e.versions || e.versions.length === 0 || e.versions.some((r) => satisfies(o.version, r))));
        return { ...base, passing, actual: o ? { type: o.type, version: o.version } : null, expected: list, updatedAt: Math.max(check.updatedAt, o?.at ?? 0) };
      }
      case 'PROCESS': {
        const want = (check.process ?? {}) as { path?: string; hashes?: string[]; signerFingerprint?: string };
        const p = this.process(identityId, check.id, String(want.path ?? ''));
        return { ...base, passing: processPasses(p, want.hashes, want.signerFingerprint ? [want.signerFingerprint] : []), actual: p ?? null, expected: want, updatedAt: Math.max(check.updatedAt, p?.at ?? 0) };
      }
      case 'PROCESS_MULTI': {
        const wants = (check.processes ?? []) as { path?: string; hashes?: string[]; signerFingerprints?: string[] }[];
        let updated = check.updatedAt;
        const results = wants.map((w) => {
          const p = this.process(identityId, check.id, String(w.path ?? ''));
          if (p) updated = Math.max(updated, p.at);
          return processPasses(p, w.hashes, w.signerFingerprints ?? []);
        });
        const passing = results.length > 0 && (String(check.semantic).toLowerCase() === 'anyof' ? results.some(Boolean) : results.every(Boolean));
        return { ...base, passing, expected: wants, updatedAt: updated };
      }
      case 'MFA':
        return this.evaluateMfa(check, apiSessionId, identity, now);
      default:
        return base;
    }
  }

  private evaluateMfa(check: Rec, apiSessionId: string, identity: IdentityRecord | undefined, now: number): CheckResult {
    const s = this.sessions.get(apiSessionId);
    const passedAt = s?.passedMfaAt;
    const configured = typeof check.timeoutSeconds === 'number' && check.timeoutSeconds > 0 ? check.timeoutSeconds : -1;
    const legacy = check.ignoreLegacyEndpoints === true && isLegacySdk(identity?.sdkInfo);
    const timeout = legacy ? -1 : configured;
    let updatedAt = check.updatedAt;
    if (passedAt === undefined) return { passing: false, timeout, timeoutRemaining: timeout === -1 ? -1 : 0, timeoutAt: null, updatedAt, actual: false, expected: true };
    let deadline = timeout > 0 ? passedAt + timeout * 1000 : Infinity;
    // A wake or unlock after the last pass starts a grace window; past it the user must pass MFA again.
    for (const [on, at] of [
      [check.promptOnWake === true, s?.wokenAt],
      [check.promptOnUnlock === true, s?.unlockedAt],
    ] as const) {
      if (on && at !== undefined && at > passedAt) {
        deadline = Math.min(deadline, at + PROMPT_GRACE_SECONDS * 1000);
        updatedAt = Math.max(updatedAt, at);
      }
    }
    if (deadline === Infinity) return { passing: true, timeout, timeoutRemaining: -1, timeoutAt: null, updatedAt, actual: true, expected: true };
    const remaining = Math.max(0, Math.floor((deadline - now) / 1000));
    return { passing: now <= deadline, timeout, timeoutRemaining: remaining, timeoutAt: deadline, updatedAt, actual: now <= deadline, expected: true };
  }

  forgetSession(apiSessionId: string) {
    this.sessions.delete(apiSessionId);
  }

  forgetIdentity(identityId: string) {
    this.identities.delete(identityId);
  }
}

function processPasses(p: ProcessData | undefined, hashes: string[] | undefined, fingerprints: string[]): boolean {
  if (!p || !p.isRunning) return false;
  if (hashes && hashes.length > 0 && !hashes.some((h) => lower(h) === lower(p.hash))) return false;
  const want = fingerprints.filter((f) => typeof f === 'string' && f !== '');
  if (want.length > 0) {
    const have = new Set(p.signerFingerprints.map(lower));
    if (!want.some((f) => have.has(lower(f)))) return false;
  }
  return true;
}

/** Unknown SDKs and C SDKs older than 0.25.0 cannot prompt for MFA (ignoreLegacyEndpoints). */
export function isLegacySdk(sdkInfo: unknown): boolean {
  const info = (sdkInfo ?? {}) as { type?: string; version?: string };
  if (!info.type) return true;
  if (/ziti-sdk-c|sdk-c/i.test(info.type)) return !satisfies(String(info.version ?? '0'), '>=0.25.0');
  return false;
}
