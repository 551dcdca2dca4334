/**
 * Posture responses (`POST /posture-response`, `/posture-response-bulk`): what a client reports of
 * its device, kept in the policy engine's posture state (memory, not the store), and which of the
 * caller's services ask for MFA again after a wake or an unlock.
 */
import { errors } from '../core/errors.js';
import type { IdentityRecord, Store } from '../store/store.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { PostureReport } from '../policy/posture.js';

export interface PostureResponsesDeps {
  store: Store;
  policy: PolicyEngine;
}

/** A service whose MFA check a wake or unlock prompts again, with the grace time left. */
export interface PromptedService {
  id: string;
  name: string;
  postureQueryType: 'MFA';
  timeout: number;
  timeoutRemaining: unknown;
}

export class PostureResponses {
  constructor(private readonly deps: PostureResponsesDeps) {}

  /**
   * Record the reports of an API session; every report is checked before any is recorded. A
   * change re-evaluates the identity's sessions once for the whole batch.
   */
  report(identity: IdentityRecord, apiSessionId: string, reports: unknown[]): PromptedService[] {
    const engine = this.deps.policy;
    for (const r of reports as PostureReport[]) {
      if (!r || typeof r !== 'object') throw errors.field('(root)', 'a posture response must be an object', r);
      if (typeof r.id !== 'string' || r.id === '') throw errors.field('id', 'id is required', r.id ?? null);
    }
    let changed = false;
    const services: PromptedService[] = [];
    for (const r of reports as PostureReport[]) {
      changed = engine.posture.report(identity.id, apiSessionId, r) || changed;
      services.push(...this.prompted(identity, apiSessionId, r));
    }
    if (changed) engine.postureChanged(identity.id);
    return services;
  }

  /** Services whose MFA checks a wake/unlock affects, with the grace time left. */
  private prompted(identity: IdentityRecord, apiSessionId: string, r: PostureReport): PromptedService[] {
    if (r.typeId !== 'ENDPOINT_STATE' || (r.woken !== true && r.unlocked !== true)) return [];
    const { store, policy: engine } = this.deps;
    const out: PromptedService[] = [];
    for (const sid of engine.accessibleServices(identity.id)) {
      const seen = new Set<string>();
      for (const t of ['Dial', 'Bind'] as const) {
        for (const p of engine.grantingPolicies(identity.id, sid, t)) {
          for (const cid of engine.policyChecks(p)) {
            if (seen.has(cid)) continue;
            const check = store.get('postureChecks', cid);
            if (check?.typeId !== 'MFA') continue;
            if (!((r.woken === true && check.promptOnWake) || (r.unlocked === true && check.promptOnUnlock))) continue;
            seen.add(cid);
            const res = engine.posture.evaluate(check, identity.id, apiSessionId, identity);
            out.push({ id: sid, name: store.nameOf('services', sid) ?? '', postureQueryType: 'MFA', timeout: check.timeoutSeconds ?? -1, timeoutRemaining: res.timeoutRemaining });
          }
        }
      }
    }
    return out;
  }
}
