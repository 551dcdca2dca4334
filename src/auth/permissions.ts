/**
 * Management API permissions: admins may do everything; `admin_readonly` may read;
 * a holder of a family (`service`) or of `family.action` (`service.read`) may do that.
 * Operations without a permission (database, summary) are for admins only.
 */
import type { Permission } from '../core/operation.js';
import type { Rec } from '../store/store.js';

export const PERMISSION_FAMILIES = [
  'auth-policy', 'ca', 'config', 'config-type', 'edge-router-policy', 'enrollment', 'external-jwt-signer',
  'identity', 'posture-check', 'router', 'service', 'service-edge-router-policy', 'service-policy', 'terminator',
] as const;

/** Every permission string an identity may hold. */
export const ALL_PERMISSIONS: ReadonlySet<string> = new Set([
  'admin_readonly',
  ...[...PERMISSION_FAMILIES, 'ops'].flatMap((f) => [f, `${f}.read`, `${f}.create`, `${f}.update`, `${f}.delete`]),
].filter((p) => p !== 'ops.create'));

export function isPermitted(identity: Rec, permission: Permission | undefined): boolean {
  if (identity.isAdmin === true) return true;
  if (!permission) return false;
  const held: string[] = identity.permissions ?? [];
  if (held.length === 0) return false;
  if (permission.action === 'read' && held.includes('admin_readonly')) return true;
  return held.includes(permission.family) || held.includes(`${permission.family}.${permission.action}`);
}

/** Whether `caller` may change `target` through the identity operations: non-admin identity managers may not touch admins. */
export function mayManageIdentity(caller: Rec | undefined, target: Rec): boolean {
  return caller?.isAdmin === true || target.isAdmin !== true;
}
