/**
 * Controller settings (`/controller-settings`): one `global` record and optional per-controller
 * records keyed by controller id. A per-controller value overrides the global one key by key; the
 * result is what applies to that controller (`GET /controller-settings/{id}/effective`).
 *
 * The only settings upstream defines are OIDC's `redirectUris` and `postLogoutUris` (the redirect
 * targets an OIDC login may use). Values are checked here: absolute URIs, at most 100 each, no
 * duplicates; unknown keys under `oidc` are dropped rather than stored.
 *
 * Example: effectiveSettings(store, 'ctrl1') → { oidc: { redirectUris: [...], postLogoutUris: [...] } }
 */
import type { Rec, Store } from '../store/store.js';

export const GLOBAL_SETTINGS_ID = 'global';
const OIDC_KEYS = ['redirectUris', 'postLogoutUris'] as const;
export type OidcSettings = Partial<Record<(typeof OIDC_KEYS)[number], string[]>>;

const MAX_URIS = 100;
const MAX_URI_LENGTH = 2048;

export interface SettingsProblem {
  field: string;
  reason: string;
  value: unknown;
}

/** Keep the known OIDC keys, each a checked, de-duplicated list of absolute URIs; returns a problem instead when one is invalid. */
export function cleanOidc(oidc: unknown): OidcSettings | SettingsProblem {
  if (oidc === undefined || oidc === null) return {};
  if (typeof oidc !== 'object' || Array.isArray(oidc)) return { field: 'oidc', reason: 'must be an object', value: oidc };
  const out: OidcSettings = {};
  for (const key of OIDC_KEYS) {
    const v = (oidc as Record<string, unknown>)[key];
    if (v === undefined || v === null) continue;
    if (!Array.isArray(v)) return { field: `oidc.${key}`, reason: 'must be an array of URIs', value: v };
    if (v.length > MAX_URIS) return { field: `oidc.${key}`, reason: `may hold at most ${MAX_URIS} URIs`, value: v.length };
    const seen = new Set<string>();
    for (const u of v) {
      if (typeof u !== 'string' || u.length === 0 || u.length > MAX_URI_LENGTH || !isAbsoluteUri(u))
        return { field: `oidc.${key}`, reason: `must hold absolute URIs (at most ${MAX_URI_LENGTH} characters)`, value: u };
      seen.add(u);
    }
    out[key] = [...seen];
  }
  return out;
}

export function isProblem(v: OidcSettings | SettingsProblem): v is SettingsProblem {
  return typeof (v as SettingsProblem).reason === 'string';
}

function isAbsoluteUri(u: string): boolean {
  if (/[\s\x00-\x1f]/.test(u)) return false;
  try {
    const url = new URL(u);
    // `http://` without a host is not a redirect target; custom schemes (app callbacks) are fine.
    return (url.protocol !== 'http:' && url.protocol !== 'https:') || url.host !== '';
  } catch {
    return false;
  }
}

function oidcOf(rec: Rec | undefined): OidcSettings {
  const o = (rec?.oidc ?? {}) as OidcSettings;
  const out: OidcSettings = {};
  for (const key of OIDC_KEYS) if (Array.isArray(o[key])) out[key] = [...o[key]!];
  return out;
}

/** What applies to controller `id`: the global settings overridden key by key by its own. */
export function effectiveSettings(store: Store, id: string): { effective: { oidc: OidcSettings }; instance: { oidc: OidcSettings } } {
  const global = store.get('controllerSettings', GLOBAL_SETTINGS_ID);
  const own = id === GLOBAL_SETTINGS_ID ? global : store.get('controllerSettings', id);
  return {
    effective: { oidc: { ...oidcOf(global), ...oidcOf(own) } },
    instance: { oidc: oidcOf(own) },
  };
}
