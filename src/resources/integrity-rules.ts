/**
 * The record invariants the resource families rely on, as checks for the datastore integrity run
 * (src/store/integrity.ts), each with the repair a fix applies:
 * - every `ref` field names an existing entity; a dangling one is repaired as deleting the
 *   target would have: cascade deletes the record, pull drops the id, restrict resets the field
 *   to its default (auth policy → `default`) or, without one, deletes the record;
 * - every policy `@id` role names an existing entity (dropped otherwise);
 * - links the field definitions do not describe: terminator routers (edge or transit router),
 *   router identities and system edge router policies of existing edge routers, tunneler-enabled
 *   edge routers having both, per-identity service config overrides, auth policy signers,
 *   enrollments with exactly one owner, usable authenticators;
 * - system records: the default auth policy, the built-in config types, a default admin.
 */
import type { Finding, GlobalCheck, RecordCheck } from '../store/integrity.js';
import type { CollectionName, Rec, RecordOf, Store, Tx } from '../store/store.js';
import { defaultAuthPolicy, DEFAULT_AUTH_POLICY_ID } from './credentials.js';
import { BUILTIN_CONFIG_TYPES, builtinConfigTypeRecord } from './builtin-config-types.js';
import type { Registry } from './registry.js';
import type { ResourceDef } from './types.js';

const label = (def: ResourceDef, rec: Rec) => `${def.path} ${rec.id}${typeof rec.name === 'string' ? ` (${rec.name})` : ''}`;

export function integrityChecks(reg: Registry): { records: RecordCheck[]; globals: GlobalCheck[] } {
  const records: RecordCheck[] = [];
  const add = <C extends CollectionName>(collection: C, check: (rec: RecordOf<C>, store: Store) => Finding[]) => records.push({ collection, check });
  /** Delete a record (and what hangs on it) as an admin delete would, bypassing system protection. */
  const remove = (def: ResourceDef, id: string) => (tx: Tx) => {
    const cur = tx.get(def.collection, id);
    if (cur) reg.deleteInTx(tx, def, cur, { force: true });
  };
  const update = <C extends CollectionName>(collection: C, id: string, change: (cur: RecordOf<C>, tx: Tx) => RecordOf<C> | undefined) => (tx: Tx) => {
    const cur = tx.get(collection, id);
    const next = cur && change(cur, tx);
    if (next) tx.put(collection, { ...next, updatedAt: Math.max(Date.now(), cur!.updatedAt + 1) });
  };

  for (const def of reg.defs) {
    for (const [field, f] of Object.entries(def.fields)) {
      if (f.ref) {
        const ref = f.ref;
        const target = reg.def(ref.collection);
        add(def.collection, (rec, store) => {
          const v = rec[field];
          if (v === undefined || v === null) return [];
          const ids: unknown[] = Array.isArray(v) ? v : [v];
          const missing = ids.filter((id) => typeof id !== 'string' || !store.has(ref.collection, id)) as string[];
          if (missing.length === 0) return [];
          const description = `${label(def, rec)}: ${field} references ${target.path} ${missing.join(', ')}, which ${missing.length > 1 ? 'do' : 'does'} not exist`;
          const stillMissing = (tx: Tx, cur: Rec) => {
            const now = cur[field];
            const list: unknown[] = Array.isArray(now) ? now : now === undefined || now === null ? [] : [now];
            return list.filter((id) => typeof id !== 'string' || !tx.exists(ref.collection, id));
          };
          let repair: (tx: Tx) => void;
          if (ref.onDelete === 'pull' && Array.isArray(v)) {
            repair = update(def.collection, rec.id, (cur, tx) => {
              const gone = stillMissing(tx, cur);
              return gone.length ? { ...cur, [field]: (cur[field] as unknown[]).filter((id) => !gone.includes(id)) } : undefined;
            });
          } else if (ref.onDelete === 'restrict' && f.default && ref.collection === 'authPolicies') {
            repair = (tx) => {
              const cur = tx.get(def.collection, rec.id);
              if (!cur || stillMissing(tx, cur).length === 0 || !tx.exists('authPolicies', DEFAULT_AUTH_POLICY_ID)) return;
              tx.put(def.collection, { ...cur, [field]: DEFAULT_AUTH_POLICY_ID, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
            };
          } else {
            repair = (tx) => {
              const cur = tx.get(def.collection, rec.id);
              if (cur && stillMissing(tx, cur).length) reg.deleteInTx(tx, def, cur, { force: true });
            };
          }
          return [{ description, repair }];
        });
      }
      if (f.roles) {
        const target = reg.def(f.roles);
        add(def.collection, (rec, store) => {
          const roles = rec[field];
          if (!Array.isArray(roles)) return [];
          const dangling = roles.filter((r) => typeof r === 'string' && r.startsWith('@') && !store.has(target.collection, r.slice(1))) as string[];
          if (dangling.length === 0) return [];
          return [
            {
              description: `${label(def, rec)}: ${field} names ${target.path} ${dangling.map((r) => r.slice(1)).join(', ')}, which ${dangling.length > 1 ? 'do' : 'does'} not exist`,
              repair: (tx) => {
                const cur = tx.get(def.collection, rec.id);
                if (!cur || !Array.isArray(cur[field])) return;
                const next = (cur[field] as string[]).filter((r) => !(r.startsWith('@') && !tx.exists(target.collection, r.slice(1))));
                if (next.length !== cur[field].length) tx.put(def.collection, { ...cur, [field]: next, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
              },
            },
          ];
        });
      }
    }
  }

  const terminators = reg.def('terminators');
  add('terminators', (rec, store) => {
    const r = rec.routerId;
    if (typeof r === 'string' && (store.has('edgeRouters', r) || store.has('routers', r))) return [];
    return [
      {
        description: `${label(terminators, rec)}: router ${String(r)} does not exist`,
        repair: (tx) => {
          const cur = tx.get('terminators', rec.id);
          if (cur && !(typeof cur.routerId === 'string' && (tx.exists('edgeRouters', cur.routerId) || tx.exists('routers', cur.routerId)))) tx.delete('terminators', rec.id);
        },
      },
    ];
  });

  const identities = reg.def('identities');
  add('identities', (rec, store) => {
    const out: Finding[] = [];
    if (rec.edgeRouterId !== undefined && !store.has('edgeRouters', rec.edgeRouterId)) {
      out.push({
        description: `${label(identities, rec)}: router identity of edge router ${rec.edgeRouterId}, which does not exist`,
        repair: (tx) => {
          const cur = tx.get('identities', rec.id);
          if (cur?.edgeRouterId !== undefined && !tx.exists('edgeRouters', cur.edgeRouterId)) reg.deleteInTx(tx, identities, cur, { force: true });
        },
      });
    }
    const pairs = rec.serviceConfigs as { serviceId: string; configId: string }[] | undefined;
    if (pairs !== undefined || rec.overrideConfigIds !== undefined) {
      const list = Array.isArray(pairs) ? pairs : [];
      const bad = list.filter((p) => !p || !store.has('services', p.serviceId) || !store.has('configs', p.configId));
      const ids = list.map((p) => p?.configId);
      const indexed = Array.isArray(rec.overrideConfigIds) ? rec.overrideConfigIds : [];
      if (bad.length || ids.length !== indexed.length || ids.some((id, i) => id !== indexed[i])) {
        out.push({
          description: bad.length
            ? `${label(identities, rec)}: service config overrides name ${bad.map((p) => `service ${p?.serviceId} / config ${p?.configId}`).join(', ')}, which do not exist`
            : `${label(identities, rec)}: the config ids of its service config overrides are out of step with the overrides`,
          repair: update('identities', rec.id, (cur, tx) => {
            const l = (Array.isArray(cur.serviceConfigs) ? cur.serviceConfigs : []) as { serviceId: string; configId: string }[];
            const keep = l.filter((p) => p && tx.exists('services', p.serviceId) && tx.exists('configs', p.configId));
            return { ...cur, serviceConfigs: keep, overrideConfigIds: keep.map((p) => p.configId) };
          }),
        });
      }
    }
    return out;
  });

  const erp = reg.def('edgeRouterPolicies');
  add('edgeRouterPolicies', (rec, store) => {
    if (rec.systemFor === undefined || store.has('edgeRouters', rec.systemFor)) return [];
    return [
      {
        description: `${label(erp, rec)}: system policy of edge router ${rec.systemFor}, which does not exist`,
        repair: (tx) => {
          const cur = tx.get('edgeRouterPolicies', rec.id);
          if (cur?.systemFor !== undefined && !tx.exists('edgeRouters', cur.systemFor)) tx.delete('edgeRouterPolicies', rec.id);
        },
      },
    ];
  });

  const edgeRouters = reg.def('edgeRouters');
  add('edgeRouters', (rec, store) => {
    if (!rec.isTunnelerEnabled) return [];
    const out: Finding[] = [];
    // Not repaired here: recreating them is the edge router update's job (PATCH isTunnelerEnabled off and on).
    if (store.idsByIndex('identities', 'edgeRouterId', rec.id).length === 0) out.push({ description: `${label(edgeRouters, rec)}: tunneler enabled but it has no router identity` });
    if (store.idsByIndex('edgeRouterPolicies', 'systemFor', rec.id).length === 0) out.push({ description: `${label(edgeRouters, rec)}: tunneler enabled but it has no system edge router policy` });
    return out;
  });

  const authPolicies = reg.def('authPolicies');
  add('authPolicies', (rec, store) => {
    const allowed: unknown[] = Array.isArray(rec.primary?.extJwt?.allowedSigners) ? rec.primary.extJwt.allowedSigners : [];
    const missing = allowed.filter((id) => typeof id !== 'string' || !store.has('externalJwtSigners', id));
    const second = rec.secondary?.requireExtJwtSigner;
    const secondMissing = second !== undefined && second !== null && !store.has('externalJwtSigners', second);
    if (missing.length === 0 && !secondMissing) return [];
    const names = [...missing, ...(secondMissing ? [second] : [])].map(String).join(', ');
    return [
      {
        description: `${label(authPolicies, rec)}: names external JWT signers ${names}, which do not exist`,
        repair: update('authPolicies', rec.id, (cur, tx) => {
          const next = structuredClone(cur);
          if (Array.isArray(next.primary?.extJwt?.allowedSigners))
            next.primary.extJwt.allowedSigners = next.primary.extJwt.allowedSigners.filter((id: unknown) => typeof id === 'string' && tx.exists('externalJwtSigners', id));
          const s = next.secondary?.requireExtJwtSigner;
          if (s !== undefined && s !== null && !tx.exists('externalJwtSigners', s)) next.secondary.requireExtJwtSigner = null;
          return next;
        }),
      },
    ];
  });

  const signers = reg.def('externalJwtSigners');
  add('externalJwtSigners', (rec, store) => {
    const p = rec.enrollAuthPolicyId;
    if (!p || store.has('authPolicies', p)) return [];
    return [
      {
        description: `${label(signers, rec)}: enrollAuthPolicyId references auth-policies ${p}, which does not exist`,
        repair: update('externalJwtSigners', rec.id, (cur, tx) => (cur.enrollAuthPolicyId && !tx.exists('authPolicies', cur.enrollAuthPolicyId) ? { ...cur, enrollAuthPolicyId: '' } : undefined)),
      },
    ];
  });

  const enrollments = reg.def('enrollments');
  add('enrollments', (rec) => {
    const owners = (['identityId', 'edgeRouterId', 'transitRouterId'] as const).filter((k) => rec[k] !== undefined && rec[k] !== null);
    if (owners.length === 1) return [];
    return [
      {
        description: `${label(enrollments, rec)}: has ${owners.length === 0 ? 'no owner' : `several owners (${owners.join(', ')})`}; an enrollment belongs to exactly one identity or router`,
        repair: (tx) => {
          if (tx.exists('enrollments', rec.id)) tx.delete('enrollments', rec.id);
        },
      },
    ];
  });

  const authenticators = reg.def('authenticators');
  add('authenticators', (rec) => {
    const ok =
      (rec.method === 'updb' && typeof rec.username === 'string' && typeof rec.passwordHash === 'string') ||
      (rec.method === 'cert' && typeof rec.fingerprint === 'string');
    if (ok) return [];
    return [
      {
        description: `${label(authenticators, rec)}: ${rec.method} authenticator without its ${rec.method === 'updb' ? 'username or password hash' : rec.method === 'cert' ? 'certificate fingerprint' : 'method'}; it can never authenticate`,
        repair: remove(authenticators, rec.id),
      },
    ];
  });

  const globals: GlobalCheck[] = [
    {
      check(store) {
        const out: Finding[] = [];
        if (!store.has('authPolicies', DEFAULT_AUTH_POLICY_ID)) {
          out.push({
            description: `auth-policies ${DEFAULT_AUTH_POLICY_ID}: the default auth policy is missing`,
            repair: (tx) => {
              if (!tx.exists('authPolicies', DEFAULT_AUTH_POLICY_ID)) tx.put('authPolicies', defaultAuthPolicy());
            },
          });
        }
        for (const t of BUILTIN_CONFIG_TYPES) {
          if (store.findUnique('configTypes', 'name', t.name)) continue;
          out.push({
            description: `config-types ${t.name}: the built-in config type is missing`,
            repair: (tx) => {
              if (tx.findUnique('configTypes', 'name', t.name) || tx.exists('configTypes', t.id)) return;
              tx.put('configTypes', builtinConfigTypeRecord(t, Date.now()));
            },
          });
        }
        let admin = false;
        for (const rec of store.scan('identities')) if (rec.isDefaultAdmin === true) admin = true;
        if (!admin) out.push({ description: 'identities: there is no default admin identity' });
        return out;
      },
    },
  ];
  return { records, globals };
}
