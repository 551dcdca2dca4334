/**
 * Declarative resource families. Each family is one `ResourceDef` in its own file, from which
 * come its store collection, filter symbols and referential rules (registry.ts: on delete
 * restrict, cascade or pull, and `@id` role entries removed from every policy), its rendering
 * (render.ts), its write rules (write.ts: references checked on write), its lists (list.ts) and
 * its list/create/detail/update/patch/delete operations (standard.ts).
 *
 * Example (abridged):
 *   export const configTypes: ResourceDef = {
 *     collection: 'configTypes', path: 'config-types', family: 'config-type',
 *     operations: crud('ConfigType', 'ConfigTypes'),
 *     fields: { name: { unique: true, filter: 'string', nullKeeps: true }, schema: { default: () => ({}) } },
 *   };
 */
import type { SymbolTable, SymbolType } from '../core/filter/index.js';
import type { CollectionName, Rec, RecordOf, Tx, Store } from '../store/store.js';
import type { Ctx } from './context.js';
import type { Permission, Reach } from '../core/operation.js';
import type { ManagementOperationId } from '../core/operation-ids.js';

export type Mode = 'create' | 'put' | 'patch';

export interface FieldDef {
  /** Value when absent on create, and when omitted on PUT. Absent: the field is left undefined. */
  default?: () => unknown;
  /** Accepted on PUT/PATCH but never changed after create (e.g. service `encryptionRequired`). */
  immutable?: boolean;
  /** Set by the server only; ignored in bodies. */
  readOnly?: boolean;
  /** PATCH/PUT with `null` keeps the current value (required fields such as `name`). */
  nullKeeps?: boolean;
  /** PATCH with `null` clears the value (a nullable field such as identity `externalId`); elsewhere a PATCH null keeps it. */
  nullClears?: boolean;
  /** Unique across the collection (a unique index; violations → 400 field `<name>` "must be unique"). */
  unique?: boolean;
  /** Secondary index (equality filters and reverse references use it). */
  index?: boolean;
  /** Name of the property in request bodies, if not the field's own (terminator `service` → serviceId). */
  bodyName?: string;
  /** Omitted from the wire when unset (type-specific fields of polymorphic entities). */
  optional?: boolean;
  /** Never rendered (secrets, hashes). */
  hidden?: boolean;
  /**
   * A credential (token, enrollment JWT) that lets its holder act as the record's owner: rendered
   * only to callers who may act as that owner (render.ts readsSecrets), blank to everyone else,
   * and not filterable or sortable by them (an ordering would leak it a character at a time).
   */
  secret?: boolean;
  /** Stored as epoch ms, rendered as RFC 3339. */
  datetime?: boolean;
  /** Public filter symbol of this type. */
  filter?: SymbolType;
  /** Role attributes of an entity: strings, none starting with `#` or `@`. */
  attributes?: boolean;
  /** Policy role list selecting entities of this collection: `#attr`, `#all` (alone) or `@<existing id>`. */
  roles?: CollectionName;
  /** Id (or, for arrays, ids) of an entity of this collection. */
  ref?: {
    collection: CollectionName;
    /** What deleting the referenced entity does to this record. */
    onDelete: 'restrict' | 'cascade' | 'pull';
    /** How a missing reference is reported: field error (default) or 404. */
    missing?: 'field' | 'notFound';
    /** Field name in the error cause, if not the field itself (upstream says `type` for configTypeId). */
    errorField?: string;
    /** Also render an entityRef under this name (configTypeId → `configType`). */
    entityRef?: string;
  };
}

/** The standard operations a family may offer. */
export type StandardOp = 'list' | 'create' | 'detail' | 'update' | 'patch' | 'delete';

/** Management API operation ids of the standard operations a family offers. */
export type OperationIds = Partial<Record<StandardOp, ManagementOperationId>>;

/** The standard six operation ids, named as upstream names them: `crud('Service', 'Services')`. */
export function crud<S extends string, P extends string>(singular: S, plural: P) {
  return {
    list: `list${plural}`,
    create: `create${singular}`,
    detail: `detail${singular}`,
    update: `update${singular}`,
    patch: `patch${singular}`,
    delete: `delete${singular}`,
  } as const;
}

/** `C`: the family's collection, whose record type its hooks see; generic code uses ResourceDef (records as Rec). */
export interface ResourceDef<C extends CollectionName = CollectionName, R = RecordOf<C>> {
  /** Store collection name, camelCase: `servicePolicies`. */
  collection: C;
  /** URL segment and entityRef `entity`: `service-policies`. */
  path: string;
  /** Permission family (singular wire name): `service-policy`, or `ops`. */
  family: string;
  /** Management API operation ids of the standard set this family offers. */
  operations: OperationIds;
  /**
   * The permission a standard operation needs where it is not `<family>.<action>` (list and
   * detail read, create creates, update and patch update, delete deletes); null: admins only.
   */
  permissions?: Partial<Record<StandardOp, Permission | null>>;
  fields: Record<string, FieldDef>;
  /**
   * Keep this family's secondary indexes (`index`, `ref`, … fields) in memory, built from the
   * records at start-up, instead of in LMDB (CollectionSpec.indexesInMemory): for records created
   * at request rates.
   */
  indexesInMemory?: boolean;
  /** Filter symbols beyond the fields' own (computed ones). */
  symbols?: SymbolTable;
  /** Extra `_links` (name → path relative to the entity, e.g. `edge-routers`). */
  links?: string[];
  /**
   * Runs inside the write after the generic field handling: derive fields, cross-field checks,
   * side writes. `body` is the validated request body; `before` is the record before (put/patch).
   */
  prepare?(rec: R, ctx: WriteCtx<R>): void;
  /**
   * Runs before a create's write, outside it, for work the write then only stores (an enrollment
   * JWT signed and its secrets sealed); `id` is the new record's. Its result is `prepared`.
   */
  beforeCreate?(id: string, body: unknown, ctx: Ctx): unknown;
  /** Runs inside the write after the record was put (side records such as enrollments). */
  afterWrite?(rec: R, ctx: WriteCtx<R>): void;
  /** Runs inside the delete write before generic reference handling: forbid (throw) or cascade. */
  beforeDelete?(rec: R, ctx: WriteCtx<R>): void;
  /**
   * Field holding the id of the identity a record belongs to (`id` for identities themselves):
   * its secrets are that identity's (render.ts readsSecrets), and its update, patch and delete
   * reach that identity (containment, standard.ts).
   */
  owner?: string;
  /** The identity an update, patch or delete reaches when it is not the record's owner (an edge router's own identity). */
  reaches?: Reach;
  /** `render` shows credentials of its own (enrollment tokens): it must honour `secrets`. */
  rendersSecrets?: boolean;
  /** Extra or overriding wire fields; `secrets`: whether the caller may read this record's credentials. */
  render?(rec: R, view: View, secrets: boolean): Record<string, unknown>;
  /**
   * List entries of this family may be kept as rendered JSON (render-cache.ts). Only for renders
   * that read no calling context: declare every other record they read. `byField`: a change to a
   * record of `collection` invalidates the entity whose id it holds in `field`; `any`: a change to
   * these collections invalidates the whole family; `cacheable`: false for records whose render
   * changes with the clock.
   */
  renderCache?: { byField?: [collection: CollectionName, field: string][]; any?: CollectionName[]; cacheable?(rec: R): boolean };
  /** Entity that may be listed but not created/changed through the standard set (e.g. system records). */
  protect?(rec: R, mode: Mode | 'delete'): void;
}

/** `R`: the record type of the family being written. */
export interface WriteCtx<R = Rec> {
  tx: Tx;
  mode: Mode | 'delete';
  body: any;
  before?: R;
  ctx: Ctx;
  /** What `beforeCreate` made for this create, if anything. */
  prepared?: unknown;
}

/** What renderers may read: the committed store and the calling context. */
export interface View {
  store: Store;
  ctx?: Ctx;
  /** entityRefs resolved during this render pass. */
  refs?: Map<string, unknown>;
}
