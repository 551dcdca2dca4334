/** Identities for tests, made through the Management API like any client would. */
import type { Client } from './server.js';

/** A non-admin identity named `name`, with a updb authenticator (username `name`) when a password is given; its id. */
export async function createUser(admin: Client, name: string, password?: string, extra: Record<string, unknown> = {}): Promise<string> {
  const id = await admin.create('/identities', { name, type: 'User', isAdmin: false, ...extra });
  if (password !== undefined) await admin.create('/authenticators', { method: 'updb', identityId: id, username: name, password });
  return id;
}
