/**
 * src/managers/fabric.ts on a real store with a real PKI (a transit router's enrollment is signed):
 * a router made with the id the body names and verified by a unique fingerprint, a fingerprint an
 * update may repeat but not change, PUT resetting only the fabric fields, and delete with the
 * family's rules; routers are found among edge and transit routers alike.
 */
import path from 'node:path';
import t from 'tap';
import { Fabric } from '../../../src/managers/fabric.js';
import { routerCollection } from '../../../src/resources/services.js';
import { loadOrCreatePki } from '../../../src/pki/bootstrap.js';
import { openStore, put, refusal } from './fixture.js';

const PRINT = 'AB:CD:'.repeat(6) + 'ab:cd:ef:01:23:45:67:89';
const HEX = PRINT.replace(/:/g, '').toLowerCase();

t.test('fabric writes', async (t) => {
  const { reg, store, dir } = openStore(t, 'fabric');
  const pkiDir = path.join(dir, 'pki');
  const pki = await loadOrCreatePki(pkiDir, { advertisedHost: 'localhost' });
  // A transit router's enrollment is signed with the PKI.
  const fabric = new Fabric({ store, reg, enrollments: { store, pki, issuer: () => ({ url: 'https://localhost:1', controllers: [] }), lifetimeMs: 5 * 60_000 } });
  await put(store, 'edgeRouters', { id: 'edge1', name: 'edge1', fingerprint: 'e'.repeat(40), isVerified: true, roleAttributes: [] });

  t.same(await refusal(() => fabric.createRouter('bad id', undefined, { name: 'r', cost: 0, noTraversal: false })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'id' });
  t.same(await refusal(() => fabric.createRouter('edge1', undefined, { name: 'r', cost: 0, noTraversal: false })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'id' }, 'an edge router has the id');
  t.same(await refusal(() => fabric.createRouter('r1', 'xyz', { name: 'r1', cost: 0, noTraversal: false })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'fingerprint' });
  t.same(await refusal(() => fabric.createRouter('r1', 'e'.repeat(40), { name: 'r1', cost: 0, noTraversal: false })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'fingerprint' }, 'another router has it');

  const r1 = await fabric.createRouter('r1', PRINT, { name: 'r1', cost: 3, noTraversal: false });
  t.equal(r1.id, 'r1', 'the id the body names');
  t.match(store.get('routers', 'r1'), { name: 'r1', cost: 3, fingerprint: HEX, isVerified: true }, 'fingerprint kept as lower-case hex');
  t.equal(routerCollection(store, 'r1'), 'routers');
  t.equal(routerCollection(store, 'edge1'), 'edgeRouters');
  t.equal(routerCollection(store, 'none'), undefined);

  t.same(await refusal(() => fabric.updateRouter('r1', 'patch', 'f'.repeat(40), {})), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'fingerprint' }, 'an update may not change the fingerprint');
  await fabric.updateRouter('r1', 'patch', PRINT, { disabled: true, tags: { a: 1 } });
  t.match(store.get('routers', 'r1'), { disabled: true, tags: { a: 1 }, cost: 3 }, 'PATCH with the same fingerprint');
  await fabric.updateRouter('r1', 'put', undefined, { name: 'r1', cost: 4, noTraversal: false });
  t.match(store.get('routers', 'r1'), { disabled: false, tags: {}, cost: 4, fingerprint: HEX }, 'PUT resets the fabric fields');
  await fabric.updateRouter('edge1', 'put', undefined, { name: 'edge-one', cost: 1, noTraversal: false });
  t.match(store.get('edgeRouters', 'edge1'), { name: 'edge-one', roleAttributes: [] }, 'an edge router keeps its edge fields');
  t.same(await refusal(() => fabric.updateRouter('none', 'patch', undefined, {})), { code: 'NOT_FOUND', status: 404 });

  const svc = await fabric.createService({ name: 'svc', terminatorStrategy: 'weighted' });
  await fabric.updateService(svc.id, 'put', { name: 'svc' });
  t.match(store.get('services', svc.id), { terminatorStrategy: 'smartrouting', maxIdleTimeMillis: 0 }, 'PUT defaults');
  const term = await fabric.createTerminator({ service: svc.id, router: 'r1', binding: 'transport', address: 'tcp:a:1' });
  await fabric.updateTerminator(term.id, 'patch', { cost: 7 });
  t.match(store.get('terminators', term.id), { cost: 7, address: 'tcp:a:1' });

  await fabric.remove('services', svc.id);
  t.notOk(store.has('services', svc.id));
  t.notOk(store.has('terminators', term.id), 'its terminators go with it');
  await fabric.remove('routers', 'r1');
  t.notOk(store.has('routers', 'r1'));
  t.same(await refusal(() => fabric.remove('routers', 'r1')), { code: 'NOT_FOUND', status: 404 });
});
