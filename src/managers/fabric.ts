/**
 * The fabric API's writes (`/fabric/v1`): routers, services and terminators written through the
 * same resource definitions and write rules as the Management API (so the same checks, change
 * events and audit records follow), with the fabric's own rules: a router created here is a
 * transit router with the id the body names, known by its certificate's fingerprint; a PUT resets
 * the fabric fields only and leaves the edge fields as they are.
 */
import { errors } from '../core/errors.js';
import type { CollectionName, Rec, Store } from '../store/store.js';
import type { Registry } from '../resources/registry.js';
import { createRecord, updateRecord, write } from '../resources/write.js';
import { routerCollection } from '../resources/services.js';
import type { EnrollmentKeys, Writer } from '../resources/types.js';

export interface FabricDeps {
  store: Store;
  reg: Registry;
  /** A transit router created here gets its enrollment, signed and sealed with these. */
  enrollments: EnrollmentKeys;
}

export type FabricUpdate = 'put' | 'patch';
/** A write's fields, already in the record's names (the handler maps the fabric wire names). */
export type Fields = Record<string, unknown>;

const ROUTER_ID = /^[A-Za-z0-9._~-]{1,64}$/;

/** What a PUT sets when the body leaves it out, per family. */
const PUT_DEFAULTS: Record<'routers' | 'services' | 'terminators', Fields> = {
  routers: { disabled: false, ctrlChanListeners: {}, tags: {} },
  services: { terminatorStrategy: 'smartrouting', maxIdleTimeMillis: 0, tags: {} },
  terminators: { cost: 0, precedence: 'default', tags: {} },
};

/** A fingerprint as the router records keep it: lower-case hex SHA-1, no separators. */
function fingerprintOf(v: unknown): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  const hex = typeof v === 'string' ? v.replace(/:/g, '').toLowerCase() : '';
  if (!/^[0-9a-f]{40}$/.test(hex)) throw errors.field('fingerprint', 'must be a SHA-1 fingerprint: 40 hexadecimal digits, colons allowed', v);
  return hex;
}

/** PUT replaces the fabric fields only: absent ones take their defaults, the edge fields stay. */
function withDefaults(fields: Fields, mode: FabricUpdate, defaults: Fields): Fields {
  if (mode === 'patch') return fields;
  const out = { ...fields };
  for (const [k, v] of Object.entries(defaults)) if (out[k] === undefined || out[k] === null) out[k] = v;
  return out;
}

export class Fabric {
  /** The fabric's families write no identity: who asks changes nothing in their write hooks. */
  private readonly writer: Writer;

  constructor(private readonly deps: FabricDeps) {
    this.writer = { store: deps.store, enrollments: deps.enrollments };
  }

  /**
   * A transit router with the given id. With a fingerprint it is verified at once: upstream's
   * fabric router is known by its certificate's fingerprint alone, so a router presenting it may
   * connect, as one that enrolled would.
   */
  async createRouter(id: unknown, fingerprint: unknown, fields: Fields): Promise<Rec> {
    if (typeof id !== 'string' || !ROUTER_ID.test(id)) throw errors.field('id', 'must be 1-64 letters, digits or . _ ~ -', id);
    const print = fingerprintOf(fingerprint);
    const { reg } = this.deps;
    return createRecord(reg, reg.def('routers'), this.writer, fields, (r, tx) => {
      if (routerCollection(tx, id)) throw errors.field('id', 'a router with this id exists', id);
      r.id = id;
      if (print) {
        if (tx.idsByIndex('routers', 'fingerprint', print).length || tx.idsByIndex('edgeRouters', 'fingerprint', print).length)
          throw errors.field('fingerprint', 'another router has this fingerprint', fingerprint);
        r.fingerprint = print;
        r.isVerified = true;
      }
    });
  }

  /** Update a router, edge or transit; the fingerprint comes from its enrollment: a body may repeat it, not change it. */
  async updateRouter(id: string, mode: FabricUpdate, fingerprint: unknown, fields: Fields): Promise<void> {
    const { store, reg } = this.deps;
    const coll = routerCollection(store, id);
    if (!coll) throw errors.notFound();
    const rec = store.get(coll, id)!;
    const given = fingerprintOf(fingerprint);
    if (given !== undefined && given !== (rec.fingerprint ?? ''))
      throw errors.field('fingerprint', 'is set by the router\'s enrollment and cannot be changed here (re-enroll the router instead)', fingerprint);
    await updateRecord(reg, reg.def(coll), this.writer, id, withDefaults(fields, mode, PUT_DEFAULTS.routers), 'patch');
  }

  createService(fields: Fields): Promise<Rec> {
    return createRecord(this.deps.reg, this.deps.reg.def('services'), this.writer, fields);
  }

  async updateService(id: string, mode: FabricUpdate, fields: Fields): Promise<void> {
    await updateRecord(this.deps.reg, this.deps.reg.def('services'), this.writer, id, withDefaults(fields, mode, PUT_DEFAULTS.services), 'patch');
  }

  createTerminator(fields: Fields): Promise<Rec> {
    return createRecord(this.deps.reg, this.deps.reg.def('terminators'), this.writer, fields);
  }

  async updateTerminator(id: string, mode: FabricUpdate, fields: Fields): Promise<void> {
    await updateRecord(this.deps.reg, this.deps.reg.def('terminators'), this.writer, id, withDefaults(fields, mode, PUT_DEFAULTS.terminators), 'patch');
  }

  /** Delete a record of `collection` with the family's delete rules (cascades, refusals). */
  async remove(collection: CollectionName, id: string): Promise<void> {
    const def = this.deps.reg.def(collection);
    await write(this.deps.store, (tx) => {
      const rec = tx.get(def.collection, id);
      if (!rec) throw errors.notFound();
      this.deps.reg.deleteInTx(tx, def, rec);
    });
  }
}
