/**
 * Request-body validation against the upstream Swagger 2.0 definitions.
 *
 * The definitions of an API are converted once into one draft-07 JSON Schema document
 * (`$id: swagger-<api>`); one ajv validator per definition is compiled on first use and cached.
 * The first violation becomes `errors.field(field, reason, value)` → 400 COULD_NOT_VALIDATE.
 *
 * Rules on top of the plain schema:
 * - `null` is accepted for optional properties (clients send null for "unset") and for `x-nullable`
 *   ones; `null` for a required, non-nullable property is reported as "<field> is required".
 * - required, non-nullable strings must be non-empty (a few upstream-defined exemptions, see EMPTY_OK).
 * - the bounds of limits.ts (one table, docs/limits.md): string lengths and control characters,
 *   integer ranges, list and map sizes, by property or definition name; strings, lists and integers
 *   without an entry get the defaults there.
 * - `tags` values must be string, boolean, number or null.
 * - polymorphic bodies (`discriminator`, e.g. `postureCheckCreate.typeId`) are validated against the
 *   subtype whose `x-class` equals the discriminator value; the subtype's definition name
 *   (`postureCheckDomainCreate`) is accepted as an alias and rewritten in place to the `x-class`
 *   value (`DOMAIN`) after validation succeeds.
 * - no defaults are applied, nothing is coerced.
 *
 * Field paths are dotted, array indices as numbers (go-openapi style): `name`, `envInfo.arch`,
 * `operatingSystems.0.type`; for an array body the first segment is the index (`0.domain`);
 * problems with the body as a whole use `(root)`.
 *
 * Example:
 *   const v = new BodyValidator('management');
 *   v.validate('identityCreate', { name: 'x', type: 'User', isAdmin: false });    // → the value
 *   v.validate('identityCreate', { type: 'User', isAdmin: false });               // throws: cause {field: 'name', reason: 'name is required', value: ''}
 */
import AjvModule from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { errors } from '../core/errors.js';
import type { ApiName } from '../core/operation.js';
import { upstreamDocument, upstreamOperations, type SwaggerSchema } from './spec/index.js';
import {
  CONTROL_CHARACTERS, DEFINITION_LIMITS, FIELD_LIMITS, INTEGER_RANGE, LIST_MAX_ITEMS, NAME_MAX_LENGTH, STRING_MAX_LENGTH, type Limit,
} from './limits.js';

export { NAME_MAX_LENGTH, STRING_MAX_LENGTH };

// ajv and ajv-formats are CommonJS with a `default` export property.
const Ajv = AjvModule.default;
const addFormats = addFormatsModule.default;

/**
 * Required strings that may be empty: upstream answers these with a domain error rather than a
 * validation error, or treats empty as "use the default".
 */
const EMPTY_OK = new Set([
  'mfaCode.code', // empty MFA code → 400 MFA_INVALID_TOKEN
  'routerExtendEnrollmentRequest.certCsr', // empty → 400 COULD_NOT_PROCESS_CSR
  'routerExtendEnrollmentRequest.serverCertCsr',
  'caUpdate.identityNameFormat', // empty → default format
  'externalIdClaim.matcherCriteria',
  'externalIdClaim.parserCriteria',
]);

const DEF_PREFIX = '#/definitions/';
/** Suffix of the synthetic definition holding a discriminated base type without its dispatch. */
const BASE_SUFFIX = '__base';

/** A draft-07 JSON Schema as the converter writes it; ajv reads any other keyword as given. */
interface Schema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  maxItems?: number;
  maxProperties?: number;
  plain?: boolean;
  propertyNames?: Schema;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  allOf?: Schema[];
  if?: Schema;
  then?: Schema;
  else?: Schema;
  [keyword: string]: unknown;
}

/** Keywords copied from Swagger schemas unchanged (everything else, `x-*`, `example`, `default`… is dropped). */
const COPIED = [
  'type', 'enum', 'minLength', 'maxLength', 'pattern', 'minimum', 'maximum', 'multipleOf',
  'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties', 'required',
] as const;

const UUID_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const DATE_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?$/;
const URI_RE = /^(?:[A-Za-z][A-Za-z0-9+.-]*:|\/)\S*$/;

/** Date-times as go-openapi `strfmt.DateTime` parses them: RFC 3339, zone optional, `T` or space. */
function isDateTime(s: string): boolean {
  const m = DATE_TIME_RE.exec(s);
  if (!m) return false;
  const [mo, d, h, mi, se] = [+m[2]!, +m[3]!, +m[4]!, +m[5]!, +m[6]!];
  return mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 && se <= 60;
}

const KNOWN_FORMATS = new Set(['date-time', 'uuid', 'uri', 'url', 'byte', 'int32', 'int64']);

function refName(schema: SwaggerSchema | undefined): string | undefined {
  const ref = schema?.$ref;
  return typeof ref === 'string' && ref.startsWith(DEF_PREFIX) ? ref.slice(DEF_PREFIX.length) : undefined;
}

/** Converts one API's Swagger definitions into a JSON Schema document. */
class Converter {
  readonly subtypes = new Map<string, { prop: string; byValue: Map<string, string>; xclassOf: Map<string, string> }>();

  constructor(
    private readonly defs: Record<string, SwaggerSchema>,
    private readonly rootId: string,
  ) {
    for (const [name, def] of Object.entries(defs)) {
      if (typeof def?.discriminator !== 'string') continue;
      const byValue = new Map<string, string>();
      const xclassOf = new Map<string, string>();
      for (const [sub, sdef] of Object.entries(defs)) {
        if (!Array.isArray(sdef?.allOf) || !sdef.allOf.some((p) => refName(p) === name)) continue;
        const xclass = typeof sdef['x-class'] === 'string' ? sdef['x-class'] : sub;
        byValue.set(xclass, sub);
        if (!byValue.has(sub)) byValue.set(sub, sub);
        xclassOf.set(sub, xclass);
      }
      this.subtypes.set(name, { prop: def.discriminator, byValue, xclassOf });
    }
  }

  ref(name: string): Schema {
    return { $ref: `${this.rootId}${DEF_PREFIX}${name}` };
  }

  /** Follows `$ref`s and single-element `allOf` wrappers to the schema that carries the type. */
  resolve(schema: SwaggerSchema | undefined): SwaggerSchema | undefined {
    let s = schema;
    for (let i = 0; s && i < 32; i++) {
      const r = refName(s);
      if (r) s = this.defs[r];
      else if (Array.isArray(s.allOf) && s.allOf.length === 1 && !s.properties && !s.type) s = s.allOf[0];
      else break;
    }
    return s;
  }

  nullable(schema: SwaggerSchema | undefined): boolean {
    let s = schema;
    for (let i = 0; s && i < 32; i++) {
      if (s['x-nullable'] === true) return true;
      const r = refName(s);
      if (r) s = this.defs[r];
      else if (Array.isArray(s.allOf) && s.allOf.length === 1 && !s.properties && !s.type) s = s.allOf[0];
      else break;
    }
    return false;
  }

  document(): Schema {
    const definitions: Record<string, Schema> = {};
    for (const [name, def] of Object.entries(this.defs)) {
      if (name === 'subTags') {
        // go-swagger reads `additionalProperties: {type: object}` as "any value"; the seeds restrict
        // tag values to null, string or boolean (numbers are let through as well).
        definitions[name] = limited({
          type: 'object',
          additionalProperties: { type: ['string', 'boolean', 'number', 'null'], maxLength: STRING_MAX_LENGTH },
        }, DEFINITION_LIMITS[name]);
        continue;
      }
      const disc = this.subtypes.get(name);
      if (disc) {
        // The discriminator accepts x-class values and subtype names; membership is checked by the dispatch.
        const plain: SwaggerSchema = { ...def, properties: { ...(def.properties ?? {}), [disc.prop]: { type: 'string' } } };
        delete plain.discriminator;
        definitions[name + BASE_SUFFIX] = this.conv(plain, name);
        const original = this.resolve(def.properties?.[disc.prop]);
        const accepted = new Set<unknown>([...(Array.isArray(original?.enum) ? original.enum : []), ...disc.byValue.keys()]);
        // An optional discriminator may be sent as null ("unset"), like any optional property.
        if (!(Array.isArray(def.required) && def.required.includes(disc.prop))) accepted.add(null);
        const bySub = new Map<string, string[]>();
        for (const [value, sub] of disc.byValue) bySub.set(sub, [...(bySub.get(sub) ?? []), value]);
        definitions[name] = {
          allOf: [
            this.ref(name + BASE_SUFFIX),
            {
              properties: { [disc.prop]: { enum: [...accepted] } },
              allOf: [...bySub].map(([sub, values]) => ({
                if: { properties: { [disc.prop]: { enum: values } }, required: [disc.prop] },
                then: this.ref(sub),
              })),
            },
          ],
        };
        continue;
      }
      definitions[name] = this.conv(def, name, undefined, DEFINITION_LIMITS[name]);
    }
    return { $id: this.rootId, definitions };
  }

  /**
   * Swagger schema → JSON Schema. `ctx` names the enclosing definition (for EMPTY_OK), `key` the
   * property this schema describes, `lim` its entry in limits.ts (a `$ref` carries its
   * definition's own).
   */
  conv(s: SwaggerSchema | undefined, ctx: string, key?: string, lim?: Limit): Schema {
    if (!s || typeof s !== 'object') return {};
    const r = refName(s);
    if (r) return this.ref(r);
    const out: Schema = {};
    const copied: Record<string, unknown> = out;
    for (const k of COPIED) if (s[k] !== undefined) copied[k] = s[k];
    if (typeof s.format === 'string' && KNOWN_FORMATS.has(s.format)) out.format = s.format;
    if (s.exclusiveMinimum === true && typeof s.minimum === 'number') {
      out.exclusiveMinimum = s.minimum;
      delete out.minimum;
    }
    if (s.exclusiveMaximum === true && typeof s.maximum === 'number') {
      out.exclusiveMaximum = s.maximum;
      delete out.maximum;
    }
    if (Array.isArray(s.allOf)) {
      out.allOf = s.allOf.map((part) => {
        // A subtype's reference to its discriminated base must not re-enter the dispatch.
        const pr = refName(part);
        if (pr && this.subtypes.has(pr)) return this.ref(pr + BASE_SUFFIX);
        return this.conv(part, ctx, key, lim);
      });
    }
    limited(out, lim);
    // A name is never empty, also where it is optional (PATCH bodies).
    if (key === 'name' && isStringSchema(out) && out.minLength === undefined && !out.enum) out.minLength = 1;
    if (s.items) out.items = this.item(s.items, ctx, key, lim?.items);
    if (s.additionalProperties !== undefined) {
      const ap = s.additionalProperties;
      if (typeof ap === 'boolean') out.additionalProperties = ap;
      else if (ap && typeof ap === 'object') {
        const free = ap.type === 'object' && !ap.properties && !ap.additionalProperties && !ap.allOf && !ap.$ref;
        out.additionalProperties = free ? true : this.item(ap, ctx, key, lim?.items);
      }
    }
    if (s.properties && typeof s.properties === 'object') {
      // Definitions with properties but no `type` (edgeRouterPolicyCreate…) are still objects.
      if (out.type === undefined) out.type = 'object';
      const required: string[] = Array.isArray(s.required) ? s.required : [];
      const properties: Record<string, Schema> = {};
      out.properties = properties;
      for (const [name, prop] of Object.entries(s.properties)) {
        const isRequired = required.includes(name);
        const nullable = !isRequired || this.nullable(prop);
        let schema = this.conv(prop, `${ctx}.${name}`, name, FIELD_LIMITS[name]);
        if (isRequired && !nullable && !EMPTY_OK.has(`${ctx}.${name}`)) schema = this.nonEmpty(prop, schema);
        properties[name] = nullable ? withNull(schema) : schema;
      }
    }
    return out;
  }

  /** Array items / map values: null only when the item schema is x-nullable. */
  private item(s: SwaggerSchema, ctx: string, key?: string, lim?: Limit): Schema {
    const schema = this.conv(s, ctx, key, lim);
    return this.nullable(s) ? withNull(schema) : schema;
  }

  /** Required strings must be non-empty (unless the schema sets its own minLength or is an enum). */
  private nonEmpty(prop: SwaggerSchema, schema: Schema): Schema {
    const target = this.resolve(prop);
    if (!target || target.type !== 'string' || target.enum || (typeof target.minLength === 'number' && target.minLength > 0)) return schema;
    if (schema.$ref) return { allOf: [schema, { minLength: 1 }] };
    return { ...schema, minLength: 1 };
  }
}

function isStringSchema(s: Schema): boolean {
  return s.type === 'string' || (Array.isArray(s.type) && s.type.includes('string'));
}

const hasType = (s: Schema, type: string) => s.type === type || (Array.isArray(s.type) && s.type.includes(type));

/**
 * Writes a limits.ts entry, or the defaults, into a converted schema (in place). A bound the
 * schema already has is kept where it is tighter; enums are bounded by their values.
 */
function limited(out: Schema, lim: Limit | undefined): Schema {
  if (isStringSchema(out) && !out.enum) {
    const max = lim?.maxLength ?? STRING_MAX_LENGTH;
    out.maxLength = out.maxLength === undefined ? max : Math.min(out.maxLength, max);
    if (lim?.plain) out.plain = true;
  }
  if (hasType(out, 'integer') || hasType(out, 'number')) {
    const min = lim?.minimum ?? INTEGER_RANGE.minimum;
    const max = lim?.maximum ?? INTEGER_RANGE.maximum;
    if (out.exclusiveMinimum === undefined) out.minimum = out.minimum === undefined ? min : Math.max(out.minimum, min);
    if (out.exclusiveMaximum === undefined) out.maximum = out.maximum === undefined ? max : Math.min(out.maximum, max);
  }
  if (hasType(out, 'array')) {
    const max = lim?.maxItems ?? LIST_MAX_ITEMS;
    out.maxItems = out.maxItems === undefined ? max : Math.min(out.maxItems, max);
  }
  if (lim?.maxProperties !== undefined) out.maxProperties = lim.maxProperties;
  if (lim?.keys) out.propertyNames = limited({ type: 'string' }, lim.keys);
  return out;
}

/** Allow JSON null in addition to what `schema` allows. */
function withNull(schema: Schema): Schema {
  if (typeof schema.type === 'string' && !schema.enum && !schema.allOf && !schema.$ref) {
    return { ...schema, type: [schema.type, 'null'] };
  }
  // if/else keeps the inner schema's error first when the value is not null.
  return { if: { type: 'null' }, else: schema };
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  boolean: 'a boolean',
  integer: 'an integer',
  number: 'a number',
  object: 'an object',
  array: 'an array',
};

const FORMAT_WORDS: Record<string, string> = {
  'date-time': 'a valid date-time (RFC 3339)',
  uuid: 'a valid UUID',
  uri: 'a valid URI',
  url: 'a valid URL',
  byte: 'base64 encoded',
  int32: 'a 32-bit integer',
  int64: 'a 64-bit integer',
};

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function decodePointer(instancePath: string): string[] {
  if (!instancePath) return [];
  return instancePath
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function valueAt(root: unknown, segments: string[]): unknown {
  let v = root;
  for (const s of segments) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[s];
  }
  return v;
}

export class BodyValidator {
  private readonly ajv: InstanceType<typeof Ajv>;
  private readonly rootId: string;
  private readonly converter: Converter;
  private readonly defs: Record<string, SwaggerSchema>;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly compiledArrays = new Map<string, ValidateFunction>();
  private readonly inline = new WeakMap<object, ValidateFunction>();
  /** Definitions used by at least one operation whose body parameter is optional. */
  private readonly optionalBody = new Set<string>();

  constructor(readonly api: ApiName) {
    const doc = upstreamDocument(api);
    this.defs = doc.definitions ?? {};
    this.rootId = `swagger-${api}`;
    this.converter = new Converter(this.defs, this.rootId);
    this.ajv = new Ajv({
      allErrors: false,
      strict: false,
      coerceTypes: false,
      useDefaults: false,
      removeAdditional: false,
      validateFormats: true,
      messages: true,
    });
    addFormats(this.ajv, ['int32', 'int64', 'byte']);
    // limits.ts `plain`: names and other identifiers hold no control characters.
    this.ajv.addKeyword({ keyword: 'plain', type: 'string', schemaType: 'boolean', errors: false, validate: (on: boolean, s: string) => !on || !CONTROL_CHARACTERS.test(s) });
    this.ajv.addFormat('date-time', { type: 'string', validate: isDateTime });
    this.ajv.addFormat('uuid', { type: 'string', validate: (s: string) => UUID_RE.test(s) });
    this.ajv.addFormat('uri', { type: 'string', validate: (s: string) => URI_RE.test(s) });
    this.ajv.addFormat('url', { type: 'string', validate: (s: string) => URI_RE.test(s) });
    this.ajv.addSchema(this.converter.document());
    for (const op of upstreamOperations(api)) {
      if (op.bodyDefinition && op.bodyRequired === false) this.optionalBody.add(op.bodyDefinition);
    }
  }

  /** Whether `definition` exists in this API's document. */
  has(definition: string): boolean {
    return Object.prototype.hasOwnProperty.call(this.defs, definition);
  }

  /**
   * Validates `value` against `#/definitions/<definition>` (or an array of it) and returns it.
   * `value === undefined` means "no body": accepted when `required` is false; when `required` is
   * omitted, it is accepted only for definitions some operation takes as an optional body
   * (`authenticate`, `genericEnroll`, `mfaCode`, `serviceConfigsAssignList`).
   * Throws ApiError COULD_NOT_VALIDATE.
   */
  validate(definition: string, value: unknown, isArray?: boolean, required?: boolean): unknown {
    if (value === undefined) {
      const optional = required === undefined ? this.optionalBody.has(definition) : !required;
      if (optional) return undefined;
      throw errors.field('(root)', 'the request body is required');
    }
    const fn = isArray ? this.arrayValidator(definition) : this.validator(definition);
    if (!fn(value)) throw this.toError(fn.errors, value);
    this.normalise(definition, value, isArray);
    return value;
  }

  /**
   * Validates against an inline Swagger schema (e.g. `UpstreamOp.bodySchema`), which may `$ref`
   * this API's definitions. Compiled once per schema object.
   */
  validateSchema(schema: SwaggerSchema, value: unknown, required = true): unknown {
    if (value === undefined) {
      if (!required) return undefined;
      throw errors.field('(root)', 'the request body is required');
    }
    let fn = this.inline.get(schema);
    if (!fn) {
      fn = this.ajv.compile(this.converter.conv(schema, '(inline)'));
      this.inline.set(schema, fn);
    }
    if (!fn(value)) throw this.toError(fn.errors, value);
    return value;
  }

  private validator(definition: string): ValidateFunction {
    let fn = this.compiled.get(definition);
    if (!fn) {
      if (!this.has(definition)) throw new Error(`unknown definition ${definition} in ${this.api} spec`);
      fn = this.ajv.compile(this.converter.ref(definition));
      this.compiled.set(definition, fn);
    }
    return fn;
  }

  private arrayValidator(definition: string): ValidateFunction {
    let fn = this.compiledArrays.get(definition);
    if (!fn) {
      if (!this.has(definition)) throw new Error(`unknown definition ${definition} in ${this.api} spec`);
      fn = this.ajv.compile({ type: 'array', items: this.converter.ref(definition) });
      this.compiledArrays.set(definition, fn);
    }
    return fn;
  }

  /** Rewrites subtype-name discriminator aliases (`postureCheckDomainCreate`) to their `x-class`. */
  private normalise(definition: string, value: unknown, isArray?: boolean) {
    const disc = this.converter.subtypes.get(definition);
    if (!disc) return;
    const fix = (v: unknown) => {
      if (v && typeof v === 'object' && !Array.isArray(v)) {
        const body = v as Record<string, unknown>;
        const value = body[disc.prop];
        const x = typeof value === 'string' ? disc.xclassOf.get(value) : undefined;
        if (x !== undefined && x !== value) body[disc.prop] = x;
      }
    };
    if (isArray && Array.isArray(value)) value.forEach(fix);
    else fix(value);
  }

  private toError(errs: ErrorObject[] | null | undefined, root: unknown) {
    const e = errs?.find((x) => x.keyword !== 'if') ?? errs?.[0];
    if (!e) return errors.field('(root)', 'the request body is invalid', root);
    const segments = decodePointer(e.instancePath);
    const join = (segs: string[]) => (segs.length ? segs.join('.') : '(root)');
    if (e.keyword === 'required') {
      const field = join([...segments, String(e.params.missingProperty)]);
      return errors.field(field, `${field} is required`);
    }
    const field = join(segments);
    const data = valueAt(root, segments);
    // A map key out of bounds (limits.ts `keys`): the map is the field, the key its value.
    if (e.propertyName !== undefined) return errors.field(field, `${field} has a key that ${this.reason(e)}`, e.propertyName);
    const last = segments[segments.length - 1];
    if (data === null && segments.length > 0) {
      return errors.field(field, /^\d+$/.test(last!) ? `${field} must not be null` : `${field} is required`, null);
    }
    return errors.field(field, `${field} ${this.reason(e)}`, data);
  }

  private reason(e: ErrorObject): string {
    // ajv types an error's params by keyword only as `Record<string, any>`.
    const p = e.params;
    switch (e.keyword) {
      case 'type': {
        const types = String(p.type).split(',').filter((t) => t !== 'null');
        return `must be ${types.map((t) => TYPE_WORDS[t] ?? t).join(' or ')}`;
      }
      case 'minLength':
        return `must be at least ${plural(p.limit, 'character')} long`;
      case 'maxLength':
        return `must be at most ${plural(p.limit, 'character')} long`;
      case 'minimum':
        return `must be greater than or equal to ${p.limit}`;
      case 'maximum':
        return `must be less than or equal to ${p.limit}`;
      case 'exclusiveMinimum':
        return `must be greater than ${p.limit}`;
      case 'exclusiveMaximum':
        return `must be less than ${p.limit}`;
      case 'minItems':
        return `must have at least ${plural(p.limit, 'item')}`;
      case 'maxItems':
        return `must have at most ${plural(p.limit, 'item')}`;
      case 'uniqueItems':
        return 'must not contain duplicate items';
      case 'enum': {
        // Subtype-name aliases of discriminators are accepted but not advertised.
        const allowed = (p.allowedValues as unknown[]).filter((v) => v !== null && (typeof v !== 'string' || !this.has(v)));
        return `must be one of [${allowed.map((v) => String(v)).join(' ')}]`;
      }
      case 'format':
        return `must be ${FORMAT_WORDS[p.format] ?? `a valid ${p.format}`}`;
      case 'pattern':
        return `must match the pattern ${p.pattern}`;
      case 'multipleOf':
        return `must be a multiple of ${p.multipleOf}`;
      case 'additionalProperties':
        return `must not have the property ${p.additionalProperty}`;
      case 'maxProperties':
        return `must have at most ${plural(p.limit, 'key')}`;
      case 'plain':
        return 'must not contain control characters';
      default:
        return e.message ?? 'is invalid';
    }
  }
}
