/**
 * The writes an OIDC login makes to its API session after the login itself (the login is
 * `Logins.login`): the refresh-token family kept on the record (rotation, and ending the family
 * when a rotated token comes back), and the session certificates a token request signs.
 *
 * What stays in the OIDC provider is protocol state that is never stored: pending authorization
 * requests and codes (in memory for minutes, as upstream keeps them) and the tokens themselves.
 *
 * Example: `await oidcSessions.recordIssue(asid, { previousRefresh: jti, oidc })` → false when the
 * presented refresh token is no longer the family's current one (or the login has ended).
 */
import type { ApiSessionCertificateRecord, Store } from '../store/store.js';
import { ApiSessions, type ApiSession } from '../auth/api-sessions.js';
import { newId } from '../resources/write.js';


/** A session certificate as signed (pki/sign-csr.ts), with its subject as the API renders it. */
export interface SessionCertificate {
  pem: string;
  fingerprint: string;
  subject: string;
  notBefore: number;
  notAfter: number;
}

export class OidcSessions {
  constructor(private readonly deps: { store: Store }) {}

  /**
   * Tokens were issued for the API session: the new refresh token's id becomes the family's only
   * valid one (`oidc`; absent: an access token alone, the family stays) in the same write that
   * checks the presented one (`previousRefresh`) is still current. False when it is not, or the
   * login has ended.
   */
  recordIssue(apiSessionId: string, o: { previousRefresh?: string; oidc?: ApiSession['oidc'] }): Promise<boolean> {
    return this.deps.store.write((tx) => {
      const cur = tx.get('apiSessions', apiSessionId);
      if (!cur) return false;
      if (o.previousRefresh !== undefined && cur.oidc?.refreshJti !== o.previousRefresh) return false;
      // Issuing tokens is activity, kept in the record: in a cluster, where the requests' own
      // activity stays on each controller, every controller learns of it at once (the record is
      // replicated), and no access token outlives the last recorded issue by more than its lifetime.
      const t = Date.now();
      tx.put('apiSessions', { ...cur, oidc: o.oidc ?? cur.oidc, lastActivityAt: Math.max(cur.lastActivityAt, t), updatedAt: t });
      return true;
    });
  }

  /**
   * A refresh token that is not its family's current one came back: whoever holds the family may
   * be an attacker, so the login ends. Decided inside a write that reads the record: in a cluster,
   * a replica that has not yet applied a rotation made on another controller (this very token's)
   * runs it again once it has. True when the login was ended for it.
   */
  endIfReused(apiSessionId: string, refreshJti: unknown): Promise<boolean> {
    return this.deps.store.write((tx) => {
      const cur = tx.get('apiSessions', apiSessionId);
      if (!cur?.oidc || cur.oidc.refreshJti === refreshJti) return false;
      ApiSessions.deleteInTx(tx, [apiSessionId]);
      return true;
    });
  }

  /** Keeps a certificate signed for the API session (ended with it); false when the login has ended. */
  addCertificate(s: Pick<ApiSession, 'id' | 'identityId'>, cert: SessionCertificate): Promise<boolean> {
    const now = Date.now();
    const rec: ApiSessionCertificateRecord = {
      id: newId(), createdAt: now, updatedAt: now, tags: {}, apiSessionId: s.id, identityId: s.identityId,
      certificate: cert.pem, fingerprint: cert.fingerprint, subject: cert.subject, validFrom: cert.notBefore, validTo: cert.notAfter,
    };
    return this.deps.store.write((tx) => {
      if (!tx.exists('apiSessions', s.id)) return false;
      tx.put('apiSessionCertificates', rec);
      return true;
    });
  }
}
