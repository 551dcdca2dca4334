/**
 * The last service requests refused to each identity by posture (`GET /identities/{id}/failed-service-requests`):
 * memory only, at most MAX_PER_IDENTITY per identity, the oldest dropped first.
 */
import type { PolicyFailure, PolicyType } from './access.js';

export interface FailedServiceRequest {
  apiSessionId: string;
  serviceId: string;
  serviceName: string;
  sessionType: PolicyType;
  when: number;
  policyFailures: PolicyFailure[];
}

const MAX_PER_IDENTITY = 50;

export class FailedRequests {
  private readonly byIdentity = new Map<string, FailedServiceRequest[]>();

  record(identityId: string, f: FailedServiceRequest) {
    let l = this.byIdentity.get(identityId);
    if (!l) this.byIdentity.set(identityId, (l = []));
    l.push(f);
    if (l.length > MAX_PER_IDENTITY) l.splice(0, l.length - MAX_PER_IDENTITY);
  }

  of(identityId: string): FailedServiceRequest[] {
    return this.byIdentity.get(identityId) ?? [];
  }

  forget(identityId: string) {
    this.byIdentity.delete(identityId);
  }
}
