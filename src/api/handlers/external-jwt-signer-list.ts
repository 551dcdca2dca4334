/** The client API's unauthenticated list of external JWT signers (their management is a standard family). */
import type { Entry } from '../context.js';
import { listRecords } from '../../resources/list.js';
import type { Registry } from '../../resources/registry.js';

export function externalJwtSignerListEntries(reg: Registry): Entry[] {
  const signerDef = reg.def('externalJwtSigners');
  return [
    // Unauthenticated: what a client needs to obtain a token, never secrets or key material.
    { api: 'client', operationId: 'listExternalJwtSigners', auth: 'none',
      handler: (ctx) =>
        listRecords(reg, signerDef, ctx, { where: (r) => r.enabled === true }, (r) => {
          const issuerUrl = typeof r.issuer === 'string' && /^https?:\/\/\S+$/i.test(r.issuer) ? r.issuer.replace(/\/+$/, '') : undefined;
          return {
            id: r.id,
            createdAt: new Date(r.createdAt).toISOString(),
            updatedAt: new Date(r.updatedAt).toISOString(),
            tags: r.tags ?? {},
            _links: { self: { href: `./external-jwt-signers/${r.id}` } },
            name: r.name,
            externalAuthUrl: r.externalAuthUrl ?? issuerUrl ?? '',
            clientId: r.clientId ?? null,
            audience: r.audience ?? null,
            scopes: r.scopes ?? [],
            targetToken: r.targetToken ?? 'ACCESS',
            enrollToCertEnabled: r.enrollToCertEnabled === true,
            enrollToTokenEnabled: r.enrollToTokenEnabled === true,
            ...(issuerUrl ? { openIdConfigurationUrl: `${issuerUrl}/.well-known/openid-configuration` } : {}),
          };
        }) },
  ];
}
