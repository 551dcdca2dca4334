/**
 * Fixtures for the policy engine suites: create entities through the Management API and log in
 * non-admin identities (password authenticators created by the admin) on the Client API.
 *
 *   const f = new Fixture(srv, admin);
 *   const svc = await f.mk('/services', { name: 's', encryptionRequired: true, roleAttributes: ['web'] });
 *   const { id, client } = await f.user('alice', ['sales']);
 */
import type { Client, Server } from './server.js';

export class Fixture {
  private n = 0;
  constructor(
    readonly srv: Server,
    readonly admin: Client,
  ) {}

  mk(path: string, body: Record<string, unknown>): Promise<string> {
    return this.admin.create(path, body);
  }

  /** A non-admin identity with a password, logged in on the Client API. */
  async user(name: string, roleAttributes: string[] = [], extra: Record<string, unknown> = {}): Promise<{ id: string; username: string; client: Client; login: () => Promise<Client> }> {
    const id = await this.mk('/identities', { name, type: 'User', isAdmin: false, roleAttributes, ...extra });
    const username = `${name}-u${++this.n}`.slice(0, 90);
    await this.mk('/authenticators', { identityId: id, method: 'updb', username, password: 'pw-for-tests-1' });
    const login = () => this.srv.login(username, 'pw-for-tests-1', 'client');
    return { id, username, client: await login(), login };
  }

  svc(name: string, roleAttributes: string[] = [], extra: Record<string, unknown> = {}) {
    return this.mk('/services', { name, encryptionRequired: true, roleAttributes, ...extra });
  }

  sp(name: string, type: 'Dial' | 'Bind', identityRoles: string[], serviceRoles: string[], extra: Record<string, unknown> = {}) {
    return this.mk('/service-policies', { name, type, semantic: 'AllOf', identityRoles, serviceRoles, ...extra });
  }

  erp(name: string, identityRoles: string[], edgeRouterRoles: string[], semantic = 'AllOf') {
    return this.mk('/edge-router-policies', { name, semantic, identityRoles, edgeRouterRoles });
  }

  serp(name: string, serviceRoles: string[], edgeRouterRoles: string[], semantic = 'AllOf') {
    return this.mk('/service-edge-router-policies', { name, semantic, serviceRoles, edgeRouterRoles });
  }

  router(name: string, roleAttributes: string[] = []) {
    return this.mk('/edge-routers', { name, roleAttributes });
  }
}

/** Ids of a list response, sorted. */
export function ids(r: { body: any }): string[] {
  return ((r.body?.data ?? []) as { id: string }[]).map((x) => x.id).sort();
}
