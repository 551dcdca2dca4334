/**
 * User-supplied JSON Schemas (config types). ajv does the work: we compile a config type's schema
 * once when it is written (rejecting invalid schemas with a field error) and cache the validator
 * by config type id and version for config writes.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { Rec } from '../store/store.js';
import { errors } from '../core/errors.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = addFormats(new Ajv({ strict: false, allErrors: false, validateSchema: true, addUsedSchema: false }));
// Upstream's validator has no `idn-hostname` check, and the built-in tunneler schemas rely on that:
// their addresses are hostnames, IPs, CIDRs and wildcards alike (`not: {pattern: "^$"}` refuses
// the empty one). Declared as accepting every string so it is neither checked nor warned about.
ajv.addFormat('idn-hostname', true);
const cache = new Map<string, { at: number; fn: ValidateFunction }>();

function compile(schema: object): ValidateFunction {
  return ajv.compile(schema);
}

/** Throws a `schema` field error unless `schema` is a valid JSON Schema object. */
export function checkSchema(schema: unknown): void {
  if (schema === undefined || schema === null) return;
  if (typeof schema !== 'object' || Array.isArray(schema)) throw errors.field('schema', 'must be an object', schema);
  if (Object.keys(schema).length === 0) return;
  try {
    compile(schema);
  } catch (e) {
    throw errors.field('schema', `invalid JSON schema: ${(e as Error).message}`, schema);
  }
}

/** Validate config `data` against its type's schema; the cause field is `(root)` like upstream. */
export function checkConfigData(type: Rec, data: unknown): void {
  const schema = type.schema;
  if (!schema || typeof schema !== 'object' || Object.keys(schema).length === 0) return;
  let entry = cache.get(type.id);
  if (!entry || entry.at !== type.updatedAt) {
    entry = { at: type.updatedAt, fn: compile(schema) };
    cache.set(type.id, entry);
  }
  if (!entry.fn(data)) {
    const err = entry.fn.errors?.[0];
    const where = err?.instancePath ? err.instancePath.slice(1).replace(/\//g, '.') : '(root)';
    throw errors.field('(root)', `${where}: ${err?.message ?? 'does not match the config type schema'}`, data);
  }
}
