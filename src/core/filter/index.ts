/**
 * The list filter language (ZitiQL): parse → compile → (optionally) plan.
 *
 * Example:
 *   const q = parseFilter('name contains "web" sort by name desc limit 5');
 *   const pred = compileFilter(q.where, symbols);      // throws INVALID_FILTER on unknown fields / bad types
 *   checkSort(q.sort ?? [], symbols);                  // throws INVALID_SORT_IDENTIFIER
 *   const plan = planIndex(q.where, indexedFields);    // index candidates, or undefined → scan
 */
export { parseFilter } from './parse.js';
export type { Expr, FilterQuery, Literal, Operand, SetSource, CmpOp } from './parse.js';
export { compileFilter, checkSort } from './compile.js';
export type { SymbolType, SymbolDef, SymbolTable } from './compile.js';
export { planIndex } from './plan.js';
export type { IndexPlan } from './plan.js';
