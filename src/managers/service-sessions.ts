/**
 * Service sessions (`POST /sessions` on the Client API): the checks in the reference's order, one
 * record per (API session, service, type), and the session token that goes with it.
 */
import { ApiError, errors } from '../core/errors.js';
import type { IdentityRecord, SessionRecord, Store } from '../store/store.js';
import { write } from '../resources/write.js';
import { timeOrderedId } from '../store/ids.js';
import { signSessionToken, type PendingToken, type SessionTokenFacts, type SigningKeys } from '../auth/tokens.js';
import type { ApiSession, ApiSessions } from '../auth/api-sessions.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { PolicyType } from '../policy/access.js';

export interface ServiceSessionsDeps {
  store: Store;
  policy: PolicyEngine;
  keys: SigningKeys;
  /** The API session timeout is a session token's lifetime. */
  sessions: Pick<ApiSessions, 'timeoutSeconds'>;
  /** The `iss` of session tokens: the advertised API address, known once the listeners serve. */
  issuer: () => string;
}

/** A create's fields as the body gives them. Example: `{ serviceId: 'svc1', type: 'Bind' }` (type: Dial when absent). */
export interface NewServiceSession {
  serviceId?: unknown;
  type?: unknown;
  tags?: unknown;
}

/** A service the identity may see: admins see every one, others those a service policy grants. */
export function serviceVisible(policy: PolicyEngine, identity: IdentityRecord, serviceId: string): boolean {
  return identity.isAdmin === true || policy.hasAccess(identity.id, serviceId);
}

export class ServiceSessions {
  /** Concurrent creates of the same (API session, service, type) share one write and one token. */
  private readonly inFlight = new Map<string, Promise<{ rec: SessionRecord; token: string }>>();

  constructor(private readonly deps: ServiceSessionsDeps) {}

  /**
   * The caller's session for a service, with a fresh token: the existing one when the API session
   * already has it, else a new record. Refusals in the reference's order: the service is not
   * visible (404), no policy grants the type, no granting policy's posture checks pass, no edge
   * router serves both.
   */
  async create(identity: IdentityRecord, apiSession: ApiSession, input: NewServiceSession): Promise<{ rec: SessionRecord; token: string }> {
    const { store, policy: engine } = this.deps;
    if (typeof input.serviceId !== 'string' || input.serviceId === '') throw errors.field('serviceId', 'serviceId is required', input.serviceId ?? null);
    const type: PolicyType = input.type === undefined || input.type === null || input.type === '' ? 'Dial' : (input.type as PolicyType);
    if (type !== 'Dial' && type !== 'Bind') throw errors.field('type', 'must be one of Dial, Bind', input.type);
    // 1. The service must be visible to the caller (has: the record is not decoded).
    const serviceId = input.serviceId;
    if (!store.has('services', serviceId) || !serviceVisible(engine, identity, serviceId)) throw errors.notFound();
    // 2. The caller must hold the requested permission.
    if (!engine.hasAccess(identity.id, serviceId, type)) throw errors.field('ServiceId', 'service not found', serviceId);
    // 3. At least one granting policy must have all its posture checks passing.
    const decision = engine.postureDecision(identity.id, apiSession.id, serviceId, type);
    if (!decision.passing) {
      // The record is read only here, to name the service.
      const serviceName = store.nameOf('services', serviceId) ?? '';
      const failure = { apiSessionId: apiSession.id, serviceId, serviceName, sessionType: type, when: Date.now(), policyFailures: decision.failures };
      engine.failures.record(identity.id, failure);
      const detail = { ...failure, when: new Date(failure.when).toISOString() };
      // The failure is both the cause's `data` and, as upstream renders it, its top-level fields.
      throw new ApiError('INVALID_POSTURE', undefined, {
        ...detail,
        code: 'INVALID_POSTURE',
        message: `posture checks failed for service ${serviceName}`,
        data: detail,
      } as { code: string; message: string; data: unknown });
    }
    // 4. The identity's and the service's edge router policies must share a router.
    if (!engine.hasCommonRouter(identity.id, serviceId)) throw new ApiError('NO_EDGE_ROUTERS_AVAILABLE');
    // Idempotent per (API session, service, type).
    const key = `${apiSession.id}\u0000${serviceId}\u0000${type}`;
    let pending = this.inFlight.get(key);
    if (!pending) {
      const existing = engine.sessions.find(apiSession.id, serviceId, type);
      const found = existing ? store.get('sessions', existing) : undefined;
      if (found) {
        // The same session again, with a fresh token: any unexpired token naming a live session is
        // valid, and keeping each issued token (~1 KB) would triple a session's memory.
        return { rec: found, token: await this.token(found).need() };
      }
      const now = Date.now();
      // Time-ordered, like every entity id: the write appends to the ends of the session B-trees
      // instead of dirtying a random page of each.
      const id = timeOrderedId();
      // The record holds nothing of the token (its jti is the session id, its signature proves the
      // rest), so the token is asked for before the write and signed, at the latest when the write
      // lands, in one batch with every token asked for meanwhile (SigningKeys.signSession).
      const signing = this.token({ id, identityId: identity.id, apiSessionId: apiSession.id, serviceId, type });
      const rec: SessionRecord = {
        id,
        createdAt: now,
        updatedAt: now,
        tags: input.tags && typeof input.tags === 'object' ? (input.tags as Record<string, unknown>) : {},
        type,
        apiSessionId: apiSession.id,
        serviceId,
        identityId: identity.id,
        servicePolicyIds: decision.policies.map((p) => p.id),
      };
      const writing = write(store, (tx) => {
        // The API session or the service may have gone meanwhile.
        if (!tx.exists('apiSessions', apiSession.id)) throw errors.unauthorized();
        if (!tx.exists('services', serviceId)) throw errors.notFound();
        tx.put('sessions', rec);
        return rec;
      });
      pending = writing.then(async (rec) => ({ rec, token: await signing.need() }));
      this.inFlight.set(key, pending);
      pending.finally(() => this.inFlight.delete(key)).catch(() => {});
    }
    return pending;
  }

  /** End a session (the caller checked it may see it); a 404 when it is gone already. */
  async remove(id: string): Promise<void> {
    await write(this.deps.store, (tx) => {
      if (!tx.delete('sessions', id)) throw errors.notFound();
    });
  }

  /**
   * A session token lives as long as an API session does without a request (the inactivity
   * timeout): like upstream's service access tokens, which expire with the access token that asked
   * for them.
   */
  private token(s: SessionTokenFacts): PendingToken {
    return signSessionToken(this.deps.keys, this.deps.issuer(), s, this.deps.sessions.timeoutSeconds);
  }
}
