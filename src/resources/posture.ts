/** Posture checks (polymorphic on `typeId`) and the fixed posture check types. */
import { errors } from '../core/errors.js';
import { crud, type FieldDef, type ResourceDef } from './types.js';
import { normMac } from '../policy/posture.js';
import type { Rec } from '../store/store.js';

/** Fields each check type carries besides the common ones. */
export const POSTURE_FIELDS: Record<string, string[]> = {
  OS: ['operatingSystems'],
  PROCESS: ['process'],
  PROCESS_MULTI: ['processes', 'semantic'],
  DOMAIN: ['domains'],
  MAC: ['macAddresses'],
  MFA: ['timeoutSeconds', 'promptOnWake', 'promptOnUnlock', 'ignoreLegacyEndpoints'],
};

const MFA_DEFAULTS: Record<string, unknown> = { timeoutSeconds: -1, promptOnWake: false, promptOnUnlock: false, ignoreLegacyEndpoints: false };

const specific: Record<string, FieldDef> = Object.fromEntries(
  [...new Set(Object.values(POSTURE_FIELDS).flat())].map((f) => [f, { optional: true } satisfies FieldDef]),
);

export const postureChecks: ResourceDef<'postureChecks'> = {
  collection: 'postureChecks',
  path: 'posture-checks',
  family: 'posture-check',
  operations: crud('PostureCheck', 'PostureChecks'),
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    typeId: { immutable: true, filter: 'string', index: true },
    roleAttributes: { attributes: true, filter: 'set' },
    version: { readOnly: true },
    ...specific,
  },
  prepare(rec, { mode, before, body }) {
    if (mode !== 'create' && body?.typeId !== undefined && body.typeId !== before!.typeId)
      throw errors.field('typeId', `the type of a posture check can not be changed from ${before!.typeId}`, body.typeId);
    const allowed = POSTURE_FIELDS[rec.typeId];
    if (!allowed) throw errors.field('typeId', `must be one of ${Object.keys(POSTURE_FIELDS).join(', ')}`, rec.typeId);
    // The type-specific fields, by name.
    const byName: Rec = rec;
    for (const f of Object.keys(specific)) {
      if (!allowed.includes(f)) delete byName[f];
      else if (mode !== 'create' && byName[f] === undefined) byName[f] = (before as Rec)[f];
    }
    if (rec.typeId === 'MFA') for (const [k, v] of Object.entries(MFA_DEFAULTS)) if (byName[k] === undefined || byName[k] === null) byName[k] = v;
    const required: Record<string, string> = { DOMAIN: 'domains', MAC: 'macAddresses', OS: 'operatingSystems', PROCESS_MULTI: 'processes' };
    const list = required[rec.typeId];
    const entries = list ? byName[list] : undefined;
    if (list && (!Array.isArray(entries) || entries.length === 0)) throw errors.field(list, 'must contain at least one entry', entries);
    if (rec.typeId === 'MAC') {
      // Stored like upstream (`AA:BB-cc…` → `aabbcc…`), so what a console formats round-trips.
      rec.macAddresses = (rec.macAddresses as unknown[]).map((m, i) => {
        const clean = typeof m === 'string' ? normMac(m) : '';
        if (!clean) throw errors.field(`macAddresses[${i}]`, 'must be a MAC address (hex digits)', m);
        return clean;
      });
    }
    if (rec.typeId === 'PROCESS' && (typeof rec.process !== 'object' || rec.process === null)) throw errors.field('process', 'is required', rec.process);
    if (rec.typeId === 'PROCESS_MULTI') {
      const s = String(rec.semantic ?? 'AllOf').toLowerCase();
      if (s !== 'allof' && s !== 'anyof') throw errors.field('semantic', 'must be one of AllOf, AnyOf', rec.semantic);
      rec.semantic = s === 'allof' ? 'AllOf' : 'AnyOf';
    }
    rec.version = mode === 'create' ? 1 : (before!.version ?? 1) + 1;
  },
};

const WINDOWS = { type: 'Windows', versions: ['10', '11', 'Server 2016', 'Server 2019', 'Server 2022'] };
const ALL_OS = [
  WINDOWS,
  { type: 'WindowsServer', versions: ['2016', '2019', '2022'] },
  { type: 'Android', versions: ['11', '12', '13', '14'] },
  { type: 'iOS', versions: ['15', '16', '17'] },
  { type: 'macOS', versions: ['12', '13', '14'] },
  { type: 'Linux', versions: [] as string[] },
];
const DESKTOP = ALL_OS.filter((o) => ['Windows', 'WindowsServer', 'macOS', 'Linux'].includes(o.type));

/** The posture check types of upstream v0.28 with the operating systems each supports. */
export const POSTURE_CHECK_TYPES = [
  { id: 'OS', name: 'Operating System Check', operatingSystems: ALL_OS },
  { id: 'PROCESS', name: 'Process Check', operatingSystems: DESKTOP },
  { id: 'DOMAIN', name: 'Windows Domain Check', operatingSystems: [WINDOWS, ALL_OS[1]] },
  { id: 'MAC', name: 'MAC Address Check', operatingSystems: ALL_OS },
  { id: 'MFA', name: 'MFA Check', operatingSystems: ALL_OS },
  { id: 'PROCESS_MULTI', name: 'Multi Process Check', operatingSystems: DESKTOP },
];
