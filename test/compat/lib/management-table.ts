/**
 * The Management API rows (see ./exerciser.ts): every operation of upstream management.yml, in an
 * order where each row finds what it needs (ids saved by earlier rows under a name). The coverage suite reads this table: an operation with no row here fails it.
 */
import { generateSync } from 'otplib';
import { makeCa, signLeaf } from './csr.js';
import { ADMIN_PASSWORD, ADMIN_USER } from '../../helpers/server.js';
import { authPolicyBody } from '../../helpers/bodies.js';
import type { Row, State } from './exerciser.js';
import { certIdentitySetup, credential, saveCredential, updbIdentitySetup } from './enroll-setup.js';
import { oidcAccessTokenWithTotp } from '../../helpers/oidc.js';

const id = (name: string) => (d: any, s: State) => s.set(name, d.id);
const by = (name: string) => (s: State) => ({ id: s.get(name) });
/** Set-up for the session rows: the user logs in on the client API and dials the service (directly, not checked here). */
async function userSession(s: State) {
  if (!s.srv) throw new Error('State.srv is not set');
  const c = await s.srv.login('cx-user', 'cx-pass-5', 'client');
  const r = await c.post('/sessions', { serviceId: s.get('svc'), type: 'Dial' });
  if (r.status !== 201) throw new Error(`creating a session as cx-user: ${r.status} ${r.text.slice(0, 300)}`);
  s.set('session', r.body.data.id);
}

const totp = (s: State) => generateSync({ secret: s.get('mfaSecret') });
const later = () => new Date(Date.now() + 3600_000).toISOString();

const authPolicy = (name: string) => ({ ...authPolicyBody(name, { maxAttempts: 5 }), tags: { p: name } });

const POSTURE: Record<string, Record<string, unknown>> = {
  OS: { operatingSystems: [{ type: 'Windows', versions: ['10'] }, { type: 'Linux', versions: [] }] },
  PROCESS: { process: { osType: 'Windows', path: 'C:\\a.exe', hashes: ['abc'], signerFingerprint: 'ff' } },
  PROCESS_MULTI: { semantic: 'AnyOf', processes: [{ osType: 'Linux', path: '/usr/bin/x', hashes: [] }] },
  DOMAIN: { domains: ['corp.example'] },
  MAC: { macAddresses: ['00:11:22:33:44:55'] },
  MFA: { timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: false, ignoreLegacyEndpoints: true },
};

const ejs = (name: string, enabled: boolean) => ({
  name, issuer: `https://${name}.example`, audience: 'cx-aud', enabled, jwksEndpoint: `https://${name}.example/jwks.json`,
  externalAuthUrl: `https://${name}.example/auth`, clientId: 'cx-client', scopes: ['openid'], claimsProperty: 'sub', useExternalId: false, targetToken: 'ACCESS',
});

export function managementRows(): Row[] {
  // a CA (openssl), made when the createCa row runs; it signs the verification certificate
  let caCache: { cert: string; key: string } | undefined;
  const ca = () => (caCache ??= makeCa('compat root'));
  const rows: Row[] = [
    // ---- meta (no session needed; real clients send their zt-session anyway)
    { op: 'listRoot', as: 'none' },
    { op: 'listVersion', as: 'none' },
    { op: 'listEnumeratedCapabilities', as: 'none' },
    { op: 'listSpecs', as: 'none', save: (d, s) => s.set('spec', d[0].id) },
    { op: 'detailSpec', as: 'none', params: by('spec') },
    { op: 'detailSpecBody', as: 'none', params: by('spec') },
    { op: 'listWellKnownCas', as: 'none' },
    { op: 'listNetworkJWTs', as: 'none' },

    // ---- login
    { op: 'authenticate', as: 'none', params: () => ({ method: 'password' }), body: () => ({ username: ADMIN_USER, password: ADMIN_PASSWORD }), save: (d, s) => (s.sessions.admin = d.token) },
    { op: 'authenticate', as: 'none', note: 'wrong password', params: () => ({ method: 'password' }), body: () => ({ username: ADMIN_USER, password: 'not-the-password' }), status: 401 },
    { op: 'getCurrentAPISession' },
    { op: 'getCurrentIdentity' },
    { op: 'listCurrentIdentityAuthenticators', save: (d, s) => s.set('adminAuth', d[0].id) },
    { op: 'detailCurrentIdentityAuthenticator', params: by('adminAuth') },

    // ---- identities, authenticators, enrollments
    { op: 'createIdentity', body: () => ({ name: 'cx-user', type: 'User', isAdmin: false, roleAttributes: ['users'], tags: { k: 'v' } }), save: id('user') },
    { op: 'createIdentity', note: 'with an OTT enrollment', body: () => ({ name: 'cx-ott', type: 'Device', isAdmin: false, enrollment: { ott: true } }), save: id('ott') },
    { op: 'createIdentity', body: () => ({ name: 'cx-spare', type: 'User', isAdmin: false, appData: { a: 'b' } }), save: id('spare') },
    { op: 'createAuthenticator', body: (s) => ({ method: 'updb', identityId: s.get('user'), username: 'cx-user', password: 'cx-pass-1' }), save: id('userAuth') },
    { op: 'createAuthenticator', body: (s) => ({ method: 'updb', identityId: s.get('spare'), username: 'cx-spare', password: 'cx-pass-2' }), save: id('spareAuth') },
    { op: 'listIdentities', params: () => ({ limit: 1000, offset: 0, filter: 'true' }) },
    { op: 'listIdentities', note: 'roleFilter', params: () => ({ roleFilter: ['#users'], roleSemantic: 'AnyOf' }) },
    { op: 'detailIdentity', params: by('user') },
    { op: 'detailIdentity', note: 'unknown id', params: () => ({ id: 'no-such-id' }), status: 404 },
    { op: 'updateIdentity', params: by('spare'), body: () => ({ name: 'cx-spare', type: 'User', isAdmin: false, roleAttributes: ['x'] }) },
    { op: 'patchIdentity', params: by('spare'), body: () => ({ tags: { p: true } }) },
    { op: 'getIdentityAuthenticators', params: by('user') },
    { op: 'getIdentityEnrollments', params: by('ott'), save: (d, s) => s.set('enrollment', d[0].id) },
    { op: 'updateIdentityTracing', params: by('user'), body: () => ({ enabled: true, duration: '5m', traceId: 'cx-trace', channels: ['ch'] }) },
    { op: 'listIdentityTypes', save: (d, s) => s.set('identityType', d[0].id) },
    { op: 'detailIdentityType', params: by('identityType') },
    { op: 'listIdentityRoleAttributes', params: () => ({ limit: -1 }) },
    { op: 'listAuthenticators' },
    { op: 'detailAuthenticator', params: by('userAuth') },
    { op: 'updateAuthenticator', params: by('spareAuth'), body: () => ({ username: 'cx-spare', password: 'cx-pass-3' }) },
    { op: 'patchAuthenticator', params: by('spareAuth'), body: () => ({ tags: { a: 'b' } }) },
    { op: 'listEnrollments' },
    { op: 'detailEnrollment', params: by('enrollment') },
    { op: 'createEnrollment', body: (s) => ({ method: 'updb', identityId: s.get('spare'), username: 'cx-spare-2', expiresAt: later() }), save: id('enrollment2') },
    { op: 'createEnrollment', note: 'same method again', body: (s) => ({ method: 'updb', identityId: s.get('spare'), username: 'cx-spare-3', expiresAt: later() }), status: 409 },
    { op: 'refreshEnrollment', params: by('enrollment2'), body: () => ({ expiresAt: later() }) },
    { op: 'refreshEnrollment', note: 'expiry in the past', params: by('enrollment2'), body: () => ({ expiresAt: new Date(Date.now() - 60_000).toISOString() }), status: 400 },
    { op: 'requestExtendAuthenticator', note: 'not certificate based', params: by('userAuth'), body: () => ({ rollKeys: false }), status: 403 },
    // an identity enrolled to a controller certificate (set-up: ./enroll-setup.ts) logs in with it
    // over mutual TLS (the proxy's relay to the certificate listener), is asked to extend, extends
    // with a new key and verifies; the old certificate is then refused; finally it is re-enrolled
    { op: 'authenticate', as: 'none', note: 'certificate', before: (s) => certIdentitySetup(s.srv!, s), cert: credential('mcert'), params: () => ({ method: 'cert' }), body: () => ({}), save: (d, s) => (s.sessions.mcert = d.token) },
    { op: 'listCurrentIdentityAuthenticators', as: 'mcert', note: 'certificate identity', save: (d, s) => s.set('mcertAuth', d.find((a: any) => a.method === 'cert').id) },
    { op: 'requestExtendAuthenticator', params: by('mcertAuth'), body: () => ({ rollKeys: true }) },
    {
      op: 'extendCurrentIdentityAuthenticator', as: 'mcert', cert: credential('mcert'), params: by('mcertAuth'),
      body: (s) => ({ clientCertCsr: s.get('mcertExt.csr') }), save: (d, s) => saveCredential(s, 'mcertNew', d.clientCert, s.get('mcertExt.key')),
    },
    { op: 'extendVerifyCurrentIdentityAuthenticator', as: 'mcert', cert: credential('mcert'), params: by('mcertAuth'), body: (s) => ({ clientCert: s.get('mcertNew.cert') }) },
    { op: 'authenticate', as: 'none', note: 'certificate replaced by the extension', cert: credential('mcert'), params: () => ({ method: 'cert' }), body: () => ({}), status: 401 },
    { op: 'authenticate', as: 'none', note: 'extended certificate', cert: credential('mcertNew'), params: () => ({ method: 'cert' }), body: () => ({}) },
    { op: 'reEnrollAuthenticator', note: 'certificate → ott', params: by('mcertAuth'), body: () => ({ expiresAt: later() }) },
    { op: 'reEnrollAuthenticator', note: 'password → updb', before: (s) => updbIdentitySetup(s.srv!, s), params: by('reenrollAuth'), body: () => ({ expiresAt: later() }) },
    { op: 'getIdentityEnrollments', note: 'after re-enrollment', params: by('certIdentity') },
    { op: 'authenticate', as: 'none', note: 'certificate of a re-enrolled authenticator', cert: credential('mcertNew'), params: () => ({ method: 'cert' }), body: () => ({}), status: 401 },

    // ---- config types, configs, services
    { op: 'createConfigType', body: () => ({ name: 'cx-ct', schema: { type: 'object', properties: { port: { type: 'integer' } } }, tags: { a: 'b' } }), save: id('ct') },
    { op: 'createConfigType', body: () => ({ name: 'cx-ct2' }), save: id('ct2') },
    { op: 'createConfig', body: (s) => ({ name: 'cx-cfg', configTypeId: s.get('ct'), data: { port: 22 }, tags: { env: 'prod' } }), save: id('cfg') },
    { op: 'createConfig', body: (s) => ({ name: 'cx-cfg2', configTypeId: s.get('ct2'), data: {} }), save: id('cfg2') },
    { op: 'createService', body: (s) => ({ name: 'cx-svc', encryptionRequired: true, roleAttributes: ['web'], configs: [s.get('cfg')], terminatorStrategy: 'smartrouting' }), save: id('svc') },
    { op: 'createService', body: () => ({ name: 'cx-svc2', encryptionRequired: false }), save: id('svc2') },
    { op: 'createService', note: 'duplicate name', body: () => ({ name: 'cx-svc', encryptionRequired: true }), status: 400 },
    { op: 'listConfigTypes' },
    { op: 'detailConfigType', params: by('ct') },
    { op: 'updateConfigType', params: by('ct2'), body: () => ({ name: 'cx-ct2b' }) },
    { op: 'patchConfigType', params: by('ct2'), body: () => ({ tags: { x: 'y' } }) },
    { op: 'listConfigsForConfigType', params: by('ct') },
    { op: 'listConfigs' },
    { op: 'detailConfig', params: by('cfg') },
    { op: 'updateConfig', params: by('cfg2'), body: () => ({ name: 'cx-cfg2b', data: { a: 1 } }) },
    { op: 'patchConfig', params: by('cfg2'), body: () => ({ tags: { x: 'y' } }) },
    { op: 'listConfigServices', params: by('cfg') },
    { op: 'listServices', params: () => ({ filter: 'name contains "cx"', limit: 10 }) },
    { op: 'listServices', note: 'malformed filter', params: () => ({ filter: 'bogus ===' }), status: 400 },
    { op: 'detailService', params: by('svc') },
    { op: 'updateService', params: by('svc2'), body: () => ({ name: 'cx-svc2b', encryptionRequired: true }) },
    { op: 'patchService', params: by('svc2'), body: () => ({ roleAttributes: ['other'] }) },
    { op: 'listServiceConfig', params: by('svc') },
    { op: 'listServiceRoleAttributes' },

    // ---- routers, terminators
    { op: 'createEdgeRouter', body: () => ({ name: 'cx-er', roleAttributes: ['east'], cost: 5, tags: { z: 'y' } }), save: id('er') },
    { op: 'createEdgeRouter', body: () => ({ name: 'cx-er-tun', isTunnelerEnabled: true }), save: id('erTun') },
    { op: 'createRouter', body: () => ({ name: 'cx-rt', cost: 7, noTraversal: true, tags: { k: 'v' } }), save: id('rt') },
    { op: 'createTransitRouter', body: () => ({ name: 'cx-trt' }), save: id('trt') },
    { op: 'createTerminator', body: (s) => ({ service: s.get('svc'), router: s.get('er'), binding: 'transport', address: 'tcp:localhost:22', tags: { t: 'x' } }), save: id('term') },
    { op: 'listEdgeRouters', params: () => ({ roleFilter: ['#east'], roleSemantic: 'AllOf' }) },
    { op: 'detailEdgeRouter', params: by('er') },
    { op: 'updateEdgeRouter', params: by('erTun'), body: () => ({ name: 'cx-er-tun', isTunnelerEnabled: true, roleAttributes: ['west'] }) },
    { op: 'patchEdgeRouter', params: by('er'), body: () => ({ cost: 9 }) },
    { op: 'reEnrollEdgeRouter', params: by('er') },
    { op: 'reEnrollEdgeRouter', note: 'unknown id', params: () => ({ id: 'no-such-router' }), status: 404 },
    { op: 'listEdgeRouterRoleAttributes' },
    { op: 'listRouters' },
    { op: 'detailRouter', params: by('rt') },
    { op: 'updateRouter', params: by('rt'), body: () => ({ name: 'cx-rt', cost: 3 }) },
    { op: 'patchRouter', params: by('rt'), body: () => ({ noTraversal: false }) },
    { op: 'listTransitRouters' },
    { op: 'detailTransitRouter', params: by('trt') },
    { op: 'updateTransitRouter', params: by('trt'), body: () => ({ name: 'cx-trt-b' }) },
    { op: 'patchTransitRouter', params: by('trt'), body: () => ({ cost: 2 }) },
    { op: 'listTerminators' },
    { op: 'detailTerminator', params: by('term') },
    { op: 'updateTerminator', params: by('term'), body: (s) => ({ service: s.get('svc'), router: s.get('er'), binding: 'transport', address: 'tcp:localhost:23' }) },
    { op: 'patchTerminator', params: by('term'), body: () => ({ cost: 10 }) },
    { op: 'listServiceTerminators', params: by('svc') },

    // ---- posture checks, policies
    ...Object.entries(POSTURE).map(([typeId, extra]): Row => ({
      op: 'createPostureCheck', note: typeId, body: () => ({ typeId, name: `cx-pc-${typeId}`, roleAttributes: ['pc'], tags: { t: typeId }, ...extra }), save: id(`pc${typeId}`),
    })),
    { op: 'listPostureChecks' },
    { op: 'detailPostureCheck', params: by('pcPROCESS_MULTI') },
    { op: 'updatePostureCheck', params: by('pcMAC'), body: () => ({ typeId: 'MAC', name: 'cx-pc-MAC', macAddresses: ['00:11:22:33:44:66'] }) },
    { op: 'patchPostureCheck', params: by('pcDOMAIN'), body: () => ({ typeId: 'DOMAIN', domains: ['lab.example'] }) },
    { op: 'listPostureCheckTypes', save: (d, s) => s.set('pcType', d[0].id) },
    { op: 'detailPostureCheckType', params: by('pcType') },
    { op: 'listPostureCheckRoleAttributes' },
    { op: 'createServicePolicy', body: (s) => ({ name: 'cx-sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#users', `@${s.get('user')}`], serviceRoles: ['#web'], postureCheckRoles: [`@${s.get('pcDOMAIN')}`] }), save: id('sp') },
    { op: 'createServicePolicy', body: (s) => ({ name: 'cx-sp2', type: 'Bind', semantic: 'AllOf', identityRoles: [`@${s.get('ott')}`], serviceRoles: [`@${s.get('svc')}`] }), save: id('sp2') },
    { op: 'createEdgeRouterPolicy', body: (s) => ({ name: 'cx-erp', semantic: 'AnyOf', identityRoles: ['#all'], edgeRouterRoles: ['#east', `@${s.get('erTun')}`] }), save: id('erp') },
    { op: 'createServiceEdgeRouterPolicy', body: () => ({ name: 'cx-serp', semantic: 'AllOf', serviceRoles: ['#all'], edgeRouterRoles: ['#all'] }), save: id('serp') },
    { op: 'listServicePolicies' },
    { op: 'detailServicePolicy', params: by('sp') },
    { op: 'updateServicePolicy', params: by('sp2'), body: () => ({ name: 'cx-sp2', type: 'Bind', semantic: 'AnyOf', identityRoles: ['#all'], serviceRoles: ['#all'] }) },
    { op: 'patchServicePolicy', params: by('sp2'), body: () => ({ tags: { x: 'y' } }) },
    { op: 'listServicePolicyIdentities', params: by('sp') },
    { op: 'listServicePolicyServices', params: by('sp') },
    { op: 'listServicePolicyPostureChecks', params: by('sp') },
    { op: 'listEdgeRouterPolicies', params: () => ({ limit: -1 }) },
    { op: 'detailEdgeRouterPolicy', params: by('erp') },
    { op: 'updateEdgeRouterPolicy', params: by('erp'), body: () => ({ name: 'cx-erp', semantic: 'AllOf', identityRoles: ['#users'], edgeRouterRoles: ['#all'] }) },
    { op: 'patchEdgeRouterPolicy', params: by('erp'), body: () => ({ tags: { x: 'y' } }) },
    { op: 'listEdgeRouterPolicyEdgeRouters', params: by('erp') },
    { op: 'listEdgeRouterPolicyIdentities', params: by('erp') },
    { op: 'listServiceEdgeRouterPolicies' },
    { op: 'detailServiceEdgeRouterPolicy', params: by('serp') },
    { op: 'updateServiceEdgeRouterPolicy', params: by('serp'), body: () => ({ name: 'cx-serp', semantic: 'AnyOf', serviceRoles: ['#web'], edgeRouterRoles: ['#east'] }) },
    { op: 'patchServiceEdgeRouterPolicy', params: by('serp'), body: () => ({ tags: { x: 'y' } }) },
    { op: 'listServiceEdgeRouterPolicyEdgeRouters', params: by('serp') },
    { op: 'listServiceEdgeRouterPolicyServices', params: by('serp') },

    // ---- policy-derived views
    { op: 'listEdgeRouterEdgeRouterPolicies', params: by('er') },
    { op: 'listEdgeRouterIdentities', params: by('er') },
    { op: 'listEdgeRouterServiceEdgeRouterPolicies', params: by('er') },
    { op: 'listEdgeRouterServices', params: by('er') },
    { op: 'listIdentitysEdgeRouterPolicies', params: by('user') },
    { op: 'listIdentityEdgeRouters', params: by('user') },
    { op: 'listIdentityServicePolicies', params: by('user') },
    { op: 'listIdentityServices', params: by('user') },
    { op: 'getIdentityPolicyAdvice', params: (s) => ({ id: s.get('user'), serviceId: s.get('svc') }) },
    { op: 'getIdentityPostureData', params: by('user') },
    { op: 'getIdentityFailedServiceRequests', params: by('user') },
    { op: 'associateIdentitysServiceConfigs', params: by('user'), body: (s) => [{ serviceId: s.get('svc'), configId: s.get('cfg') }] },
    { op: 'listIdentitysServiceConfigs', params: by('user') },
    { op: 'disassociateIdentitysServiceConfigs', params: by('user'), body: (s) => [{ serviceId: s.get('svc'), configId: s.get('cfg') }] },
    { op: 'listServiceEdgeRouters', params: by('svc') },
    { op: 'listServiceIdentities', params: by('svc') },
    { op: 'listServiceServiceEdgeRouterPolicies', params: by('svc') },
    { op: 'listServiceServicePolicies', params: by('svc') },
    { op: 'listSummary' },

    // ---- CAs, auth policies, external JWT signers, controller settings, controllers
    {
      op: 'createCa',
      body: () => ({
        name: 'cx-ca', certPem: ca().cert, identityRoles: ['ca'], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: true,
        identityNameFormat: '[caName]-[commonName]', tags: { src: 'test' },
        externalIdClaim: { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'SPLIT', parserCriteria: '/', index: 1 },
      }),
      save: id('ca'),
    },
    { op: 'listCas' },
    { op: 'detailCa', params: by('ca'), save: (d, s) => s.set('caToken', d.verificationToken) },
    { op: 'verifyCa', note: 'common name is not the verification token', params: by('ca'), body: () => signLeaf(ca(), 'not-the-token'), status: 400 },
    { op: 'verifyCa', params: by('ca'), body: (s) => signLeaf(ca(), s.get('caToken')) },
    { op: 'updateCa', params: by('ca'), body: () => ({ name: 'cx-ca', identityRoles: [], isAuthEnabled: true, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true, identityNameFormat: '[commonName]' }) },
    { op: 'patchCa', params: by('ca'), body: () => ({ tags: { x: 'y' } }) },
    { op: 'getCaJwt', params: by('ca') },
    { op: 'createAuthPolicy', body: () => authPolicy('cx-ap'), save: id('ap') },
    { op: 'listAuthPolicies' },
    { op: 'detailAuthPolicy', params: () => ({ id: 'default' }) },
    { op: 'updateAuthPolicy', params: by('ap'), body: () => authPolicy('cx-ap') },
    { op: 'patchAuthPolicy', params: by('ap'), body: () => ({ name: 'cx-ap-b' }) },
    { op: 'createExternalJwtSigner', body: () => ejs('cx-ejs', true), save: id('ejs') },
    { op: 'listExternalJwtSigners' },
    { op: 'detailExternalJwtSigner', params: by('ejs') },
    { op: 'updateExternalJwtSigner', params: by('ejs'), body: () => ({ ...ejs('cx-ejs', false), jwksEndpoint: 'https://cx-ejs.example/jwks2.json' }) },
    { op: 'patchExternalJwtSigner', params: by('ejs'), body: () => ({ enabled: true }) },
    { op: 'createControllerSetting', body: () => ({ controllerId: 'cx-ctrl', oidc: { redirectUris: ['https://a.example/cb'], postLogoutUris: ['https://a.example/out'] }, tags: { site: 'a' } }), save: id('cs') },
    { op: 'listControllerSettings' },
    { op: 'detailControllerSetting', params: by('cs') },
    { op: 'detailControllerSettingEffective', params: () => ({ id: 'global' }) },
    { op: 'updateControllerSetting', params: by('cs'), body: () => ({ oidc: { redirectUris: ['https://b.example/cb'] } }) },
    { op: 'patchControllerSetting', params: by('cs'), body: () => ({ oidc: { postLogoutUris: ['https://b.example/out'] } }) },
    { op: 'listControllers' },

    // ---- datastore
    { op: 'checkDataIntegrity' },
    { op: 'createDatabaseSnapshot' },

    // ---- sessions: a user logs in on the management API and manages its own things
    { op: 'authenticate', as: 'none', note: 'user', params: () => ({ method: 'password' }), body: () => ({ username: 'cx-user', password: 'cx-pass-1' }), save: (d, s) => ((s.sessions.user = d.token), s.set('userApiSession', d.id)) },
    { op: 'listIdentities', as: 'user', note: 'not an admin', status: 401 },
    { op: 'getCurrentIdentity', as: 'user' },
    { op: 'patchCurrentIdentityAuthenticator', as: 'user', params: by('userAuth'), body: () => ({ password: 'cx-pass-4', currentPassword: 'cx-pass-1' }) },
    { op: 'updateCurrentIdentityAuthenticator', as: 'user', params: by('userAuth'), body: () => ({ username: 'cx-user', password: 'cx-pass-5', currentPassword: 'cx-pass-4' }) },
    // service sessions (made by the user on the client API) seen and ended by the administrator
    { op: 'createServicePolicy', note: 'Dial, no posture', body: (s) => ({ name: 'cx-sp-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: [`@${s.get('user')}`], serviceRoles: [`@${s.get('svc')}`] }), save: id('spDial') },
    { op: 'listSessions', note: 'with a session', before: userSession },
    { op: 'detailSession', params: by('session') },
    { op: 'detailSessionRoutePath', params: by('session') },
    { op: 'deleteSession', params: by('session') },
    { op: 'deleteServicePolicy', params: by('spDial') },

    // MFA on the management API: enrol, verify, recovery codes, TOTP token, second-factor login, removal
    { op: 'enrollMfa', as: 'user' },
    { op: 'detailMfa', as: 'user', save: (d, s) => s.set('mfaSecret', new URL(d.provisioningUrl).searchParams.get('secret') ?? '') },
    { op: 'detailMfaQrCode', as: 'user', accept: 'image/png' },
    { op: 'verifyMfa', as: 'user', body: (s) => ({ code: totp(s) }) },
    { op: 'createMfaRecoveryCodes', as: 'user', body: (s) => ({ code: totp(s) }) },
    { op: 'detailMfaRecoveryCodes', as: 'user', params: (s) => ({ 'mfa-validation-code': totp(s) }) },
    // upstream mints TOTP tokens for OIDC-backed sessions only (a zt-session one: 400 INVALID_BACKING_TOKEN_TYPE)
    { op: 'createTotpToken', as: 'userOidc', body: (s) => ({ code: totp(s) }),
      before: async (s) => { s.sessions.userOidc = await oidcAccessTokenWithTotp(s.srv!, 'cx-user', 'cx-pass-5', () => totp(s)); } },
    { op: 'authenticate', as: 'none', note: 'user with MFA', params: () => ({ method: 'password' }), body: () => ({ username: 'cx-user', password: 'cx-pass-5' }), save: (d, s) => (s.sessions.user2 = d.token) },
    { op: 'authenticateMfa', as: 'user2', body: (s) => ({ code: totp(s) }) },
    { op: 'deleteMfa', as: 'user2', params: (s) => ({ 'mfa-validation-code': totp(s) }) },
    { op: 'enrollMfa', as: 'user2', note: 'again, for the administrator to remove' },
    { op: 'removeIdentityMfa', params: by('user') },
    // Tokens are signed and not stored: the login's API-session id finds the session in the list.
    { op: 'listAPISessions', params: () => ({ limit: -1 }), save: (d, s) => { if (!d.some((x: any) => x.id === s.get('userApiSession'))) throw new Error('the user API session is not listed'); } },
    { op: 'detailAPISessions', params: by('userApiSession') },
    { op: 'listSessions' },
    { op: 'detailSession', note: 'unknown id', params: () => ({ id: 'no-such-id' }), status: 404 },
    { op: 'deleteSession', note: 'unknown id', params: () => ({ id: 'no-such-id' }), status: 404 },
    { op: 'deleteAPISessions', params: by('userApiSession') },
    { op: 'getCurrentAPISession', as: 'user', note: 'deleted API session', status: 401 },
    { op: 'dataIntegrityResults' },

    // ---- identity state
    { op: 'disableIdentity', params: by('spare'), body: () => ({ durationMinutes: 10 }) },
    { op: 'enableIdentity', params: by('spare') },

    // ---- deletes
    { op: 'deleteEnrollment', params: by('enrollment') },
    { op: 'deleteTerminator', params: by('term') },
    { op: 'deleteServiceEdgeRouterPolicy', params: by('serp') },
    { op: 'deleteEdgeRouterPolicy', params: by('erp') },
    { op: 'deleteServicePolicy', params: by('sp2') },
    { op: 'deleteServicePolicy', params: by('sp') },
    { op: 'deleteService', params: by('svc2') },
    { op: 'deleteService', params: by('svc') },
    { op: 'deleteConfig', params: by('cfg') },
    { op: 'deleteConfig', params: by('cfg2') },
    { op: 'deleteConfigType', params: by('ct') },
    { op: 'deleteConfigType', params: by('ct2') },
    ...Object.keys(POSTURE).map((typeId): Row => ({ op: 'deletePostureCheck', note: typeId, params: by(`pc${typeId}`) })),
    { op: 'deleteEdgeRouter', params: by('erTun') },
    { op: 'deleteEdgeRouter', params: by('er') },
    { op: 'deleteRouter', params: by('rt') },
    { op: 'deleteTransitRouter', params: by('trt') },
    { op: 'deleteCa', params: by('ca') },
    { op: 'deleteAuthenticator', params: by('spareAuth') },
    { op: 'deleteIdentity', params: by('spare') },
    { op: 'deleteIdentity', note: 'again', params: by('spare'), status: 404 },
    { op: 'deleteAuthPolicy', params: by('ap') },
    { op: 'deleteExternalJwtSigner', params: by('ejs') },
    { op: 'deleteControllerSetting', params: by('cs') },
    { op: 'fixDataIntegrity' },
    { op: 'deleteCurrentAPISession' },
  ];
  return rows;
}

