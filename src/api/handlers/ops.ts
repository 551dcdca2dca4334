/**
 * Operations: router control channel, controllers, tracing (issue #7).
 * Keys are `<api>:<operationId>` for one API or a bare operationId for both; a handler here wins
 * over the standard resource handlers and over a PENDING mark (src/api/operations.ts).
 */
import type { Ctx } from '../context.js';
import type { Reply } from '../operation.js';
import type { Registry } from '../../resources/define.js';

export function opsHandlers(_reg: Registry): Record<string, (ctx: Ctx) => Reply | Promise<Reply>> {
  return {};
}
