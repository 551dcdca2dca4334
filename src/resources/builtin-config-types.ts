/**
 * Config types every controller has from its first start, with upstream's fixed ids and full JSON
 * Schemas (builtin-config-types.json, the schema documents of upstream's built-in types): consoles
 * and tunnelers address them by these ids (`intercept.v1` is `g7cIWbcGg`, `host.v1` `NH5p4FpGR`) and
 * build their forms from the schemas. The two tunneler types carry our brand's names
 * (`mesh-tunneler-*.v1`) under upstream's ids.
 */
import builtins from './builtin-config-types.json' with { type: 'json' };

export interface BuiltinConfigType {
  id: string;
  name: string;
  schema: Record<string, unknown>;
}

export const BUILTIN_CONFIG_TYPES: readonly BuiltinConfigType[] = builtins as BuiltinConfigType[];

/** The record of a built-in type as first written. */
export function builtinConfigTypeRecord(t: BuiltinConfigType, now: number) {
  return { id: t.id, createdAt: now, updatedAt: now, tags: {}, name: t.name, schema: structuredClone(t.schema) };
}

/** The id of the built-in type named `name` (`intercept.v1` → `g7cIWbcGg`). */
export function builtinConfigTypeId(name: string): string {
  const t = BUILTIN_CONFIG_TYPES.find((x) => x.name === name);
  if (!t) throw new Error(`no built-in config type ${name}`);
  return t.id;
}
