/** Identities for tests, made through the Management API like any client would. */
import type { Client } from './server.js';

/** A non-admin identity named `name`, with a updb authenticator (username `name`) when a password is given; its id. */
export async function createUser(admin: Client, name: string, password?: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await admin.post('/identities', { name, type: 'User', isAdmin: false, ...extra });
  if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${r.text}`);
  if (password !== undefined) {
    const a = await admin.post('/authenticators', { method: 'updb', identityId: r.body.data.id, username: name, password });
    if (a.status !== 201) throw new Error(`authenticator ${name}: ${a.status} ${a.text}`);
  }
  return r.body.data.id;
}
