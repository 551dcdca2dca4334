/**
 * Identity disable/enable and the password lockout that uses it.
 *
 * Disabled = `disabledAt` set and `disabledUntil` null (indefinitely) or in the future, so an
 * identity re-enables itself when the time passes, with no timer to lose on restart. Both
 * timestamps are stored on the identity record, so a disable or a lockout survives restarts.
 * Disabling ends every API session and session of the identity in the same write
 * (`ApiSessions.endForIdentityInTx`); the router also refuses any request whose identity is disabled.
 *
 * Lockout: consecutive wrong passwords are counted on the UPDB authenticator (hidden
 * `failedAttempts`, persisted, so a restart does not reset it); reaching the auth policy's
 * `maxAttempts` (> 0) disables the identity for `lockoutDurationMinutes` (0 = indefinitely) and
 * resets the count; a successful login resets it too.
 */
import type { IdentityRecord, Store, Tx } from '../store/store.js';
import { ApiSessions } from './api-sessions.js';
import { isDisabledAt } from './login-policy.js';

/** Longest explicit disable: 100 years (keeps `disabledUntil` a sane date). */
export const MAX_DISABLE_MINUTES = 100 * 365 * 24 * 60;

/**
 * Disable inside a write: `durationMinutes` 0 = indefinitely, each minute `minuteMs` long (config
 * `minuteMs`). Ends the identity's sessions.
 */
export function disableIdentityInTx(tx: Tx, identity: IdentityRecord, durationMinutes: number, minuteMs = 60_000, now = Date.now()): IdentityRecord {
  const next = {
    ...identity,
    disabledAt: now,
    disabledUntil: durationMinutes > 0 ? now + durationMinutes * minuteMs : null,
    updatedAt: Math.max(now, identity.updatedAt + 1),
  };
  tx.put('identities', next);
  ApiSessions.endForIdentityInTx(tx, identity.id);
  return next;
}

/** Enable inside a write: clears both timestamps and every lockout count of the identity. */
export function enableIdentityInTx(tx: Tx, identity: IdentityRecord, now = Date.now()): void {
  const { disabledAt: _a, disabledUntil: _u, ...rest } = identity;
  tx.put('identities', { ...rest, updatedAt: Math.max(now, identity.updatedAt + 1) });
  for (const aid of tx.idsByIndex('authenticators', 'identityId', identity.id)) {
    const a = tx.get('authenticators', aid);
    if (a && a.failedAttempts) {
      const { failedAttempts: _f, ...clean } = a;
      tx.put('authenticators', clean);
    }
  }
}

/**
 * Count a wrong password against an authenticator; lock the identity out when its auth policy
 * says so, for its minutes of `minuteMs`. Returns true when this attempt locked the identity.
 */
export async function recordFailedPassword(store: Store, authenticatorId: string, minuteMs = 60_000): Promise<boolean> {
  return store.write((tx) => {
    const auth = tx.get('authenticators', authenticatorId);
    if (!auth) return false;
    const identity = tx.get('identities', auth.identityId);
    if (!identity || isDisabledAt(identity)) return false;
    const policy = tx.get('authPolicies', identity.authPolicyId ?? 'default');
    const updb = policy?.primary?.updb;
    const max = Number(updb?.maxAttempts ?? 0);
    const count = Number(auth.failedAttempts ?? 0) + 1;
    if (max > 0 && count >= max) {
      const { failedAttempts: _f, ...clean } = auth;
      tx.put('authenticators', clean);
      disableIdentityInTx(tx, identity, Math.max(0, Number(updb?.lockoutDurationMinutes ?? 0)), minuteMs);
      return true;
    }
    // Not a user-visible change: updatedAt stays.
    tx.put('authenticators', { ...auth, failedAttempts: count });
    return false;
  });
}

/** A successful login clears the count (only written when there is one). */
export async function clearFailedPasswords(store: Store, authenticatorId: string): Promise<void> {
  const auth = store.get('authenticators', authenticatorId);
  if (!auth?.failedAttempts) return;
  await store.write((tx) => {
    const cur = tx.get('authenticators', authenticatorId);
    if (!cur?.failedAttempts) return;
    const { failedAttempts: _f, ...clean } = cur;
    tx.put('authenticators', clean);
  });
}
