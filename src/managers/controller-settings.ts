/**
 * Controller settings writes (`/controller-settings`): the global record, which always exists, and
 * the per-controller records. What the values mean and how they combine is src/control/settings.ts.
 */
import { errors } from '../core/errors.js';
import type { ControllerSettingRecord, Store } from '../store/store.js';
import { write } from '../resources/write.js';
import { GLOBAL_SETTINGS_ID, cleanOidc, isProblem, type OidcSettings } from '../control/settings.js';

export interface ControllerSettingsDeps {
  store: Store;
  /** This controller's id: its record may be written before it exists. */
  controllerId: string;
}

/** A write's fields as the body gives them. Example: `{ oidc: { redirectUris: ['https://app/cb'] }, tags: {} }`. */
export interface SettingsFields {
  oidc?: unknown;
  tags?: Record<string, unknown> | null;
}

export type SettingsUpdate = 'put' | 'patch';

const CONTROLLER_ID = /^[A-Za-z0-9._-]{1,64}$/;

function oidcOf(fields: SettingsFields): OidcSettings {
  const cleaned = cleanOidc(fields.oidc);
  if (isProblem(cleaned)) throw errors.field(cleaned.field, cleaned.reason, cleaned.value);
  return cleaned;
}

export class ControllerSettings {
  constructor(private readonly deps: ControllerSettingsDeps) {}

  /** Known controller ids: the global record, this controller, and any with settings. */
  known(id: string): boolean {
    return id === GLOBAL_SETTINGS_ID || id === this.deps.controllerId || this.deps.store.has('controllerSettings', id);
  }

  /** Settings for a controller that has none yet. */
  async create(controllerId: unknown, fields: SettingsFields): Promise<string> {
    if (typeof controllerId !== 'string' || !CONTROLLER_ID.test(controllerId))
      throw errors.field('controllerId', 'must be a controller id (1-64 of A-Z a-z 0-9 . _ -)', controllerId);
    const id = controllerId;
    const oidc = oidcOf(fields);
    await write(this.deps.store, (tx) => {
      if (tx.exists('controllerSettings', id)) throw errors.field('controllerId', 'settings for this controller already exist', id);
      const now = Date.now();
      tx.put('controllerSettings', { id, createdAt: now, updatedAt: now, tags: fields.tags ?? {}, oidc });
    });
    return id;
  }

  /** PUT replaces the OIDC settings, PATCH merges them key by key; this controller's record is created on first write. */
  async update(id: string, mode: SettingsUpdate, fields: SettingsFields): Promise<void> {
    if (!this.known(id)) throw errors.notFound();
    const oidc = oidcOf(fields);
    await write(this.deps.store, (tx) => {
      const cur = tx.get('controllerSettings', id);
      const now = Date.now();
      // This controller's own record is created on first write (the controller exists even without one).
      const base: ControllerSettingRecord = cur ?? { id, createdAt: now, updatedAt: now, tags: {}, oidc: {} };
      const next = mode === 'put' ? oidc : { ...(base.oidc ?? {}), ...oidc };
      const tags = mode === 'put' ? fields.tags ?? {} : fields.tags ?? base.tags ?? {};
      tx.put('controllerSettings', { ...base, oidc: next, tags, updatedAt: now });
    });
  }

  /** Remove a controller's settings; the global record always exists: removing it resets it. */
  async remove(id: string): Promise<void> {
    if (!this.known(id)) throw errors.notFound();
    await write(this.deps.store, (tx) => {
      const cur = tx.get('controllerSettings', id);
      const now = Date.now();
      if (id === GLOBAL_SETTINGS_ID) tx.put('controllerSettings', { ...(cur ?? { id, createdAt: now, tags: {} }), oidc: {}, updatedAt: now });
      else if (cur) tx.delete('controllerSettings', id);
      else throw errors.notFound();
    });
  }
}
