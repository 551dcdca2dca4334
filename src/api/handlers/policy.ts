/**
 * Policy engine views, client services and sessions, service configs, posture responses (issue #4).
 * Keys are `<api>:<operationId>` for one API or a bare operationId for both; a handler here wins
 * over the standard resource handlers (src/api/operations.ts).
 */
import type { Ctx } from '../context.js';
import type { Reply } from '../operation.js';
import type { Registry } from '../../resources/define.js';
import { policyViewHandlers } from './policy-views.js';
import { policyClientHandlers } from './policy-client.js';

export function policyHandlers(reg: Registry): Record<string, (ctx: Ctx) => Reply | Promise<Reply>> {
  return { ...policyViewHandlers(reg), ...policyClientHandlers(reg) };
}
