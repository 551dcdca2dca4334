/**
 * PKI and enrollment (issue #5): enroll flows (enroll-flows.ts), enrollment administration, CA
 * verification and JWTs, re-enrollment and extension requests (enroll-admin.ts), certificate
 * extension, API-session certificates, network JWTs, the enrollment JWKS and challenge
 * (enroll-certs.ts), token enrollment with an external JWT (enroll-token.ts).
 * Keys are `<api>:<operationId>` for one API or a bare operationId for both; a handler here wins
 * over the standard resource handlers (src/api/operations.ts).
 */
import type { Ctx } from '../context.js';
import type { Reply } from '../operation.js';
import type { Registry } from '../../resources/define.js';
import { enrollFlowHandlers } from './enroll-flows.js';
import { enrollAdminHandlers } from './enroll-admin.js';
import { enrollCertHandlers } from './enroll-certs.js';
import { enrollToken } from './enroll-token.js';

export function enrollHandlers(reg: Registry): Record<string, (ctx: Ctx) => Reply | Promise<Reply>> {
  return { ...enrollFlowHandlers(), ...enrollAdminHandlers(reg), ...enrollCertHandlers(reg), enrollToken };
}
