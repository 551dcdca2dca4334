/**
 * src/auth/permissions.ts: which permission strings cover which (`covers`), who may reach whom
 * (`dominates`, containment in docs/auth.md) and the trust-anchor families in `isPermitted`.
 */
import t from 'tap';
import { ALL_PERMISSIONS, PERMISSION_FAMILIES, TRUST_ANCHOR_FAMILIES, covers, dominates, isPermitted } from '../../../src/auth/permissions.js';
import type { IdentityRecord } from '../../../src/store/store.js';

const who = (permissions: string[] | undefined, isAdmin = false) => ({ id: 'x', createdAt: 0, updatedAt: 0, isAdmin, permissions }) as IdentityRecord;

t.test('covers: itself, and a family its actions; admin_readonly only itself', async (t) => {
  t.ok(covers(['service'], 'service'));
  for (const a of ['read', 'create', 'update', 'delete']) t.ok(covers(['service'], `service.${a}`), `service covers service.${a}`);
  t.notOk(covers(['service.read'], 'service'), 'an action does not cover its family');
  t.notOk(covers(['service.read'], 'service.update'), 'nor another action');
  t.notOk(covers(['service'], 'service-policy.read'), 'a family is not a prefix match');
  t.notOk(covers(['admin_readonly'], 'service.read'), 'admin_readonly covers no read permission string');
  t.ok(covers(['admin_readonly'], 'admin_readonly'));
  for (const f of [...PERMISSION_FAMILIES, 'ops']) t.notOk(covers([f], 'admin_readonly'), `${f} does not cover admin_readonly`);
});

t.test('dominates: admins reach everyone; others reach no admin and nobody holding more', async (t) => {
  const admin = who(undefined, true);
  t.ok(dominates(admin, who(undefined, true)), 'admin → admin');
  t.ok(dominates(admin, who([...ALL_PERMISSIONS])), 'admin → everything');
  t.notOk(dominates(undefined, who(undefined)), 'no caller reaches nobody');
  for (const p of ALL_PERMISSIONS) {
    const caller = who([p]);
    t.ok(dominates(caller, who(undefined)), `${p} → an identity with no permission`);
    t.ok(dominates(caller, who([])), `${p} → an empty permission list`);
    t.ok(dominates(caller, who([p])), `${p} → its peer`);
    t.notOk(dominates(caller, who(undefined, true)), `${p} ↛ an admin`);
    t.notOk(dominates(caller, who([p], true)), `${p} ↛ an admin holding the same`);
    const more = [...ALL_PERMISSIONS].find((q) => !covers([p], q))!;
    t.notOk(dominates(caller, who([p, more])), `${p} ↛ ${p} + ${more}`);
  }
  t.ok(dominates(who(['identity']), who(['identity.read', 'identity.update'])), 'a family reaches holders of its actions');
  t.notOk(dominates(who(['identity.update']), who(['identity'])), 'an action does not reach its family');
  t.ok(dominates(who(['identity', 'service']), who(['service.read'])), 'several held');
  t.notOk(dominates(who(['identity', 'service']), who(['service.read', 'config.read'])), 'every permission must be covered');
});

t.test('isPermitted: trust-anchor writes are admin-only; reads stay', async (t) => {
  t.same([...TRUST_ANCHOR_FAMILIES].sort(), ['auth-policy', 'ca', 'controller-setting', 'external-jwt-signer']);
  for (const family of TRUST_ANCHOR_FAMILIES) {
    for (const action of ['create', 'update', 'delete'] as const) {
      t.notOk(isPermitted(who([family]), { family, action }), `${family} holder may not ${action}`);
      t.notOk(isPermitted(who([`${family}.${action}`]), { family, action }), `${family}.${action} holder may not ${action}`);
      t.notOk(isPermitted(who([...ALL_PERMISSIONS]), { family, action }), `every permission string together may not ${action} ${family}`);
      t.ok(isPermitted(who(undefined, true), { family, action }), `an admin may ${action} ${family}`);
    }
  }
  t.ok(isPermitted(who(['ca']), { family: 'ca', action: 'read' }), 'ca holder reads CAs');
  t.ok(isPermitted(who(['external-jwt-signer.read']), { family: 'external-jwt-signer', action: 'read' }));
  t.ok(isPermitted(who(['admin_readonly']), { family: 'auth-policy', action: 'read' }));
  t.ok(isPermitted(who(['service.update']), { family: 'service', action: 'update' }), 'other families unchanged');
});
