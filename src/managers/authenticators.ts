/**
 * Authenticators: an identity's primary credentials (updb: a username and a password hashed in the
 * worker pool; cert: a client certificate) and the rules for creating and changing them, by an
 * administrator or by the identity itself. Their list, detail and delete are the family's standard
 * operations (src/resources/credentials.ts).
 */
import type { Config } from '../config.js';
import { ApiError, errors } from '../core/errors.js';
import type { AuthenticatorRecord, Rec, Store } from '../store/store.js';
import { mustGet, type Registry } from '../resources/registry.js';
import { createRecord, write } from '../resources/write.js';
import { checkPassword, checkUsername, hashPassword } from '../auth/passwords.js';
import { parseCert } from '../pki/certs.js';
import { issued, x509 } from '../pki/chain.js';
import type { Pki } from '../pki/bootstrap.js';
import type { WorkerPool } from '../pool.js';

export interface AuthenticatorsDeps {
  store: Store;
  reg: Registry;
  config: Config;
  pool: WorkerPool;
  pki: Pick<Pki, 'signingCertPem'>;
}

/** A create's fields as the body gives them. Example: `{ identityId, method: 'updb', username: 'ann', password: '…' }`. */
export interface NewAuthenticator {
  identityId?: unknown;
  method?: unknown;
  username?: unknown;
  password?: unknown;
  certPem?: unknown;
  tags?: unknown;
}

/** An update's fields: a PUT sets all three, a PATCH those present and not null. */
export interface AuthenticatorChanges {
  username?: unknown;
  password?: unknown;
  tags?: unknown;
}

export type UpdateMode = 'put' | 'patch';

export class Authenticators {
  constructor(private readonly deps: AuthenticatorsDeps) {}

  /**
   * One authenticator per method and identity. The password is hashed and the certificate parsed
   * before the write.
   */
  async create(input: NewAuthenticator): Promise<Rec> {
    const { store, reg } = this.deps;
    const identity = typeof input.identityId === 'string' ? store.get('identities', input.identityId) : undefined;
    if (!identity) throw errors.field('identityId', 'no identity found with the given id', input.identityId);
    const method = input.method;
    let extra: Record<string, unknown>;
    if (method === 'updb') {
      const username = checkUsername(input.username);
      const passwordHash = await hashPassword(this.deps, checkPassword(this.deps, identity, input.password));
      extra = { method, username, passwordHash };
    } else if (method === 'cert') {
      const info = parseCert(input.certPem, 'certPem');
      // Signed by the controller's signing CA → a network certificate (extendable, re-enrolls as ott).
      const network = issued(info.cert, x509(this.deps.pki.signingCertPem));
      extra = { method, certPem: input.certPem, fingerprint: info.fingerprint, certNotAfter: info.notAfter, isIssuedByNetwork: network, isExtendRequested: false, isKeyRollRequested: false };
    } else throw errors.field('method', 'must be one of updb, cert', method);
    // The family's write hooks make nothing and check no caller: the store is all they need.
    return createRecord(reg, reg.def('authenticators'), { store }, { tags: input.tags }, (r, tx) => {
      if (!tx.exists('identities', identity.id)) throw errors.field('identityId', 'no identity found with the given id', identity.id);
      for (const aid of tx.idsByIndex('authenticators', 'identityId', identity.id)) {
        if (tx.get('authenticators', aid)?.method === method)
          throw new ApiError('MAX_AUTHENTICATOR_METHODS_REACHED', `the identity already has a ${method} authenticator`);
      }
      Object.assign(r, extra, { identityId: identity.id });
    });
  }

  /** An administrator's update of any authenticator. */
  update(id: string, mode: UpdateMode, changes: AuthenticatorChanges): Promise<void> {
    return this.apply(this.get(id), mode, changes);
  }

  /**
   * An identity's update of its own updb authenticator: it proves knowledge of the current
   * password. Another identity's authenticator is a 404, as if it did not exist.
   */
  async updateOwn(ownerId: string, id: string, mode: UpdateMode, changes: AuthenticatorChanges, currentPassword: unknown): Promise<void> {
    const before = this.get(id);
    if (before.identityId !== ownerId) throw errors.notFound();
    if (before.method !== 'updb') throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'only updb authenticators have a password to change');
    const good = await this.deps.pool.run('verifyPassword', { hash: before.passwordHash!, password: String(currentPassword ?? '') });
    if (!good) throw errors.unauthorized();
    return this.apply(before, mode, changes);
  }

  private get(id: string): AuthenticatorRecord {
    return mustGet(this.deps.store, this.deps.reg.def('authenticators'), id);
  }

  private async apply(before: AuthenticatorRecord, mode: UpdateMode, changes: AuthenticatorChanges): Promise<void> {
    const { store, reg } = this.deps;
    if (before.method !== 'updb' && (changes.username !== undefined || changes.password !== undefined))
      throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'only updb authenticators have a username and password');
    const identity = mustGet(store, reg.def('identities'), before.identityId);
    const next: Record<string, unknown> = {};
    if (mode === 'put' || (changes.username !== undefined && changes.username !== null)) next.username = checkUsername(changes.username);
    if (mode === 'put' || (changes.password !== undefined && changes.password !== null)) {
      next.passwordHash = await hashPassword(this.deps, checkPassword(this.deps, identity, changes.password));
    }
    if (mode === 'put') next.tags = changes.tags ?? {};
    else if (changes.tags !== undefined && changes.tags !== null) next.tags = changes.tags;
    await write(store, (tx) => {
      const cur = tx.get('authenticators', before.id);
      if (!cur) throw errors.notFound();
      tx.put('authenticators', { ...cur, ...next, updatedAt: Date.now() });
    });
  }
}
