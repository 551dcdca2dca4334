/**
 * Service sessions (a dial or bind of one service within an API session): the rules of creating
 * one, in the reference's check order, and its write. Creates are idempotent per (API session,
 * service, type): concurrent ones share one write and one token, and a later one answers the
 * existing session with a fresh token.
 *
 * Example: `await serviceSessions.create({ identity, apiSessionId }, { serviceId, type: 'Dial' })`
 * → `{ rec, token }`, or 404 / INVALID_POSTURE / NO_EDGE_ROUTERS_AVAILABLE.
 */
import { ApiError, errors } from '../core/errors.js';
import type { Rec, Store } from '../store/store.js';
import { timeOrderedId } from '../store/ids.js';
import { signSessionToken, type PendingToken, type SessionTokenFacts, type SigningKeys } from '../auth/tokens.js';
import type { ApiSessions } from '../auth/api-sessions.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { PolicyType } from '../policy/access.js';
import { write } from '../resources/write.js';

declare module '../core/context.js' {
  interface Services {
    serviceSessions: ServiceSessions;
  }
}

export interface ServiceSessionsDeps {
  store: Store;
  policy: PolicyEngine;
  keys: SigningKeys;
  /** The API sessions: a session token lives as long as their inactivity timeout. */
  sessions: Pick<ApiSessions, 'timeoutSeconds'>;
  /** `iss` of session tokens: the controller's base URL (known once the listener is bound). */
  issuer: () => string;
}

/** Who asks: the caller's identity record and its API session. */
export interface SessionCaller {
  identity: Rec;
  apiSessionId: string;
}

/** The fields of a create, as the body carries them (`type` defaults to Dial). */
export interface SessionCreate {
  serviceId?: unknown;
  type?: unknown;
  tags?: unknown;
}

export class ServiceSessions {
  /** Creates in flight per (API session, service, type): a concurrent create joins the one running. */
  private readonly inFlight = new Map<string, Promise<{ rec: Rec; token: string }>>();

  constructor(private readonly deps: ServiceSessionsDeps) {}

  async create(caller: SessionCaller, body: SessionCreate): Promise<{ rec: Rec; token: string }> {
    const { store, policy } = this.deps;
    const { identity, apiSessionId } = caller;
    if (typeof body.serviceId !== 'string' || body.serviceId === '') throw errors.field('serviceId', 'serviceId is required', body.serviceId ?? null);
    const type: PolicyType = body.type === undefined || body.type === null || body.type === '' ? 'Dial' : (body.type as PolicyType);
    if (type !== 'Dial' && type !== 'Bind') throw errors.field('type', 'must be one of Dial, Bind', body.type);
    const serviceId = body.serviceId;
    // 1. The service must be visible to the caller (admins see every service).
    if (!store.has('services', serviceId)) throw errors.notFound();
    if (identity.isAdmin !== true && !policy.hasAccess(identity.id, serviceId)) throw errors.notFound();
    // 2. The caller must hold the requested permission.
    if (!policy.hasAccess(identity.id, serviceId, type)) throw errors.field('ServiceId', 'service not found', serviceId);
    // 3. At least one granting policy must have all its posture checks passing.
    const decision = policy.postureDecision(identity.id, apiSessionId, serviceId, type);
    if (!decision.passing) {
      // The record is read only here, to name the service.
      const serviceName = store.nameOf('services', serviceId) ?? '';
      const failure = { apiSessionId, serviceId, serviceName, sessionType: type, when: Date.now(), policyFailures: decision.failures };
      policy.failures.record(identity.id, failure);
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
    if (!policy.hasCommonRouter(identity.id, serviceId)) throw new ApiError('NO_EDGE_ROUTERS_AVAILABLE');
    const key = `${apiSessionId}\u0000${serviceId}\u0000${type}`;
    let pending = this.inFlight.get(key);
    if (!pending) {
      const existing = policy.sessions.find(apiSessionId, serviceId, type);
      const found = existing ? store.get('sessions', existing) : undefined;
      // The same session again, with a fresh token: any unexpired token naming a live session is
      // valid, and keeping each issued token (~1 KB) would triple a session's memory.
      if (found) return { rec: found, token: await this.token(found).need() };
      pending = this.write(caller, serviceId, type, body.tags, decision.policies.map((p) => p.id));
      this.inFlight.set(key, pending);
      pending.finally(() => this.inFlight.delete(key)).catch(() => {});
    }
    return pending;
  }

  /**
   * The record and its token. The record holds nothing of the token (its jti is the session id,
   * its signature proves the rest), so the token is asked for before the write and signed, at the
   * latest when the write lands, in one batch with every token asked for meanwhile
   * (SigningKeys.signSession).
   */
  private async write(caller: SessionCaller, serviceId: string, type: PolicyType, tags: unknown, servicePolicyIds: string[]): Promise<{ rec: Rec; token: string }> {
    const now = Date.now();
    const { identity, apiSessionId } = caller;
    // Time-ordered, like every entity id: the write appends to the ends of the session B-trees
    // instead of dirtying a random page of each.
    const id = timeOrderedId();
    const signing = this.token({ id, identityId: identity.id, apiSessionId, serviceId, type });
    // Every field of the sessions family (resources/sessions.ts) is server-set and read-only, so
    // the record is made here rather than through the generic body-applying create path.
    const rec: Rec = {
      id,
      createdAt: now,
      updatedAt: now,
      tags: tags && typeof tags === 'object' ? tags : {},
      type,
      apiSessionId,
      serviceId,
      identityId: identity.id,
      servicePolicyIds,
    };
    await write(this.deps.store, (tx) => {
      // The API session or the service may have gone meanwhile.
      if (!tx.exists('apiSessions', apiSessionId)) throw errors.unauthorized();
      if (!tx.exists('services', serviceId)) throw errors.notFound();
      tx.put('sessions', rec);
    });
    return { rec, token: await signing.need() };
  }

  /**
   * A session token lives as long as an API session does without a request (the inactivity
   * timeout): like upstream's service access tokens, which expire with the access token that
   * asked for them.
   */
  private token(s: SessionTokenFacts | Rec): PendingToken {
    return signSessionToken(this.deps.keys, this.deps.issuer(), s as SessionTokenFacts, this.deps.sessions.timeoutSeconds);
  }
}
