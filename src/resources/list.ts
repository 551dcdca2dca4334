/** Listing a family: the list engine over its collection, role filters, and pages spliced from kept renders. */
import { errors } from '../core/errors.js';
import { ListWriter } from '../core/envelope.js';
import { parseListParams, listSteps, type ListSource } from '../core/query.js';
import { sliced } from '../core/slices.js';
import type { Ctx } from './context.js';
import type { Reply } from '../core/operation.js';
import type { Limiter } from '../auth/limiter.js';
import type { CollectionName, Rec, RecordOf } from '../store/store.js';
import type { ResourceDef, View } from './types.js';
import type { Registry } from './registry.js';
import { hasSecrets, readsSecrets, renderRecord } from './render.js';

export function listSource(reg: Registry, def: ResourceDef, extra?: Partial<ListSource>): ListSource {
  const symbols = reg.symbols.get(def.collection)!;
  return {
    collection: def.collection,
    symbols,
    filterableFields: Object.keys(symbols),
    ...extra,
  };
}

/**
 * List a collection (optionally restricted) and render each record. A small list answers at once;
 * a longer one continues in slices with the event loop free in between (slices.ts), and one that
 * turns out large (an unbounded `limit=-1` over a large collection, a filter on an unindexed
 * field) goes on only while few such lists run at once (`app.auth.largeAnswers`; beyond its
 * queue, 429 RATE_LIMITED).
 */
export function listRecords<C extends CollectionName>(reg: Registry, def: ResourceDef<C>, ctx: Ctx, extra?: Partial<ListSource>, render?: (r: RecordOf<C>) => unknown): Reply | Promise<Reply> {
  const limiter = ctx.app.auth.largeAnswers;
  // Known large before any work: refused at once while the large answers' slots and queue are
  // full, instead of after the ADMIT_AFTER_MS of main-thread work that tells other lists apart.
  if (limiter.full && ctx.req.query.get('limit') === '-1' && ctx.app.store.count(def.collection) > KNOWN_LARGE_ROWS) throw limiter.refuse();
  // The records listed are def's own, so `render` gets its record type.
  return sliced(listReplySteps(reg, def, ctx, extra, render as ((r: Rec) => unknown) | undefined), (rest) => untilWritten(limiter, rest));
}

/**
 * An unbounded page (`limit=-1`) over more records than this is a large answer from the start:
 * bounded pages stop at MAX_LIMIT (500) records, and rendering several times that many takes
 * longer than ADMIT_AFTER_MS (slices.ts).
 */
const KNOWN_LARGE_ROWS = 2_000;

/**
 * The longest a large answer keeps its slot while its client reads it; then it is written on
 * outside the limit (a client that stops reading must not hold a slot for good).
 */
const HOLD_WHILE_WRITTEN_MS = 30_000;

/**
 * A large answer holds its slot until it is written (Reply.finished), not only while it is
 * computed: its writing takes turns too (slices.ts), and its pages stay in memory until then. With
 * the slot freed at the end of the computation, any number of finished answers were written at
 * once, sharing the turns with the lists being computed, and an admitted list took as long as all
 * of them together (docs/operations.md).
 */
async function untilWritten(limiter: Limiter, rest: () => Promise<Reply>): Promise<Reply> {
  const release = await limiter.acquire();
  let reply: Reply;
  try {
    reply = await rest();
  } catch (e) {
    release();
    throw e;
  }
  const timer = setTimeout(release, HOLD_WHILE_WRITTEN_MS);
  timer.unref();
  reply.finished = () => {
    clearTimeout(timer);
    release();
  };
  return reply;
}

/**
 * Records rendered between two points where a sliced list may pause: one not kept as JSON costs
 * tens of µs to read and render, and all large answers together get TURN_MS a turn (slices.ts).
 */
const RENDER_STEP = 8;

function* listReplySteps(reg: Registry, def: ResourceDef, ctx: Ctx, extra?: Partial<ListSource>, render?: (r: Rec) => unknown): Generator<void, Reply> {
  const src = listSource(reg, def, extra);
  const view: View = { store: ctx.app.store, ctx, refs: new Map() };
  // Callers who may not read every record's credentials neither filter nor sort by them.
  const allSecrets = readsSecrets(view) || !hasSecrets(def);
  if (!allSecrets) src.symbols = reg.publicSymbols.get(def.collection)!;
  const selected = roleFilter(ctx, def);
  if (selected) {
    const prev = src.candidates ? new Set(src.candidates) : undefined;
    src.candidates = prev ? [...selected].filter((id) => prev.has(id)) : selected;
  }
  const p = parseListParams(ctx.req.query, src.symbols);
  const { page, pagination } = yield* listSteps(ctx.app.store, src, p);
  const store = ctx.app.store;
  // A page of ids: records are read here, and only those not kept as JSON (below).
  const load = (e: Rec | string) => (typeof e === 'string' ? store.get(def.collection, e) : e);
  // The answer is written an entry at a time into byte pieces (ListWriter): a pause after every
  // RENDER_STEP entries and after every piece bounds each slice's work.
  const out = new ListWriter();
  let n = 0;
  if (!render && def.renderCache && allSecrets) {
    // Entries kept as JSON: the page is spliced from them.
    for (const e of page) {
      if (++n % RENDER_STEP === 0) yield;
      let json = reg.renders.get(def, typeof e === 'string' ? e : e.id);
      if (json === undefined) {
        const rec = load(e);
        if (!rec) continue;
        json = reg.renders.json(def, rec, () => renderRecord(reg, def, rec, view));
      }
      if (out.add(json)) yield;
    }
    return out.finish(pagination, src.filterableFields);
  }
  const r = render ?? ((rec: Rec) => renderRecord(reg, def, rec, view));
  for (const e of page) {
    if (++n % RENDER_STEP === 0) yield;
    const rec = load(e);
    // As in an array JSON.stringify'd whole: a render of `undefined` is `null`.
    if (rec && out.add(JSON.stringify(r(rec)) ?? 'null')) yield;
  }
  return out.finish(pagination, src.filterableFields);
}

/**
 * `roleFilter=#a&roleFilter=@id&roleSemantic=AnyOf` on entities that carry role attributes: the ids
 * selected, read from the role-attribute index (AllOf intersects, AnyOf unites) plus existing `@id`s.
 */
function roleFilter(ctx: Ctx, def: ResourceDef): Set<string> | undefined {
  const roles = ctx.req.query.getAll('roleFilter').filter((r) => r !== '');
  if (roles.length === 0) return undefined;
  const attrField = Object.entries(def.fields).find(([, f]) => f.attributes)?.[0];
  if (!attrField) return undefined;
  const semantic = (ctx.req.query.get('roleSemantic') ?? 'AllOf').toLowerCase();
  if (semantic !== 'allof' && semantic !== 'anyof') throw errors.field('roleSemantic', 'must be one of AllOf, AnyOf', ctx.req.query.get('roleSemantic'));
  const store = ctx.app.store;
  const attrs = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
  const out = new Set<string>();
  if (attrs.includes('all')) {
    for (const rec of store.scan(def.collection)) out.add(rec.id);
    return out;
  }
  if (attrs.length > 0) {
    const sets = attrs.map((a) => store.idsByIndex(def.collection, attrField, a));
    if (semantic === 'anyof') for (const s of sets) for (const id of s) out.add(id);
    else {
      sets.sort((a, b) => a.length - b.length);
      const rest = sets.slice(1).map((s) => new Set(s));
      for (const id of sets[0]) if (rest.every((s) => s.has(id))) out.add(id);
    }
  }
  for (const r of roles) if (r.startsWith('@') && store.get(def.collection, r.slice(1))) out.add(r.slice(1));
  return out;
}

