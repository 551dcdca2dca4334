/**
 * Management API permissions: admins may do everything; `admin_readonly` may read;
 * a holder of a family (`service`) or of `family.action` (`service.read`) may do that.
 * Operations without a permission (database, summary) are for admins only.
 *
 * Containment (docs/auth.md): no permission reaches further than it names. Two rules keep a
 * delegated permission from becoming a way to act as someone who holds more:
 * - the trust-anchor families (TRUST_ANCHOR_FAMILIES) are written by full admins alone;
 * - a write that reaches an identity (`reaches` on its operation entry) needs `dominates`.
 */
import type { Permission } from '../core/operation.js';
import type { Rec, IdentityRecord } from '../store/store.js';

export const PERMISSION_FAMILIES = [
  'auth-policy', 'ca', 'config', 'config-type', 'edge-router-policy', 'enrollment', 'external-jwt-signer',
  'identity', 'posture-check', 'router', 'service', 'service-edge-router-policy', 'service-policy', 'terminator',
] as const;

/** Every permission string an identity may hold. */
export const ALL_PERMISSIONS: ReadonlySet<string> = new Set([
  'admin_readonly',
  ...[...PERMISSION_FAMILIES, 'ops'].flatMap((f) => [f, `${f}.read`, `${f}.create`, `${f}.update`, `${f}.delete`]),
].filter((p) => p !== 'ops.create'));

/**
 * The families whose records decide who may log in as whom: a signer's tokens name identities,
 * a CA's certificates log in as identities (`externalIdClaim`) and enroll new ones with roles, an
 * auth policy decides which methods and signers every identity under it may use, and the
 * controller settings (`controller-setting`, no permission string: its reads are `ops.read`)
 * name the OIDC redirect and post-logout URIs that receive authorization codes. Whoever writes
 * one can become anyone, so every write of these families is a full admin's alone, whatever
 * permission the caller holds; holders of the family keep read.
 */
export const TRUST_ANCHOR_FAMILIES: ReadonlySet<string> = new Set(['auth-policy', 'ca', 'controller-setting', 'external-jwt-signer']);

export function isPermitted(identity: IdentityRecord, permission: Permission | undefined): boolean {
  if (identity.isAdmin === true) return true;
  if (!permission) return false;
  if (permission.action !== 'read' && TRUST_ANCHOR_FAMILIES.has(permission.family)) return false;
  const held: string[] = identity.permissions ?? [];
  if (held.length === 0) return false;
  if (permission.action === 'read' && held.includes('admin_readonly')) return true;
  return held.includes(permission.family) || held.includes(`${permission.family}.${permission.action}`);
}

/** Whether holding `held` grants the permission string `p`: itself, or its family (`x` covers `x.read`). `admin_readonly` only itself. */
export function covers(held: readonly string[], p: string): boolean {
  if (held.includes(p)) return true;
  const dot = p.indexOf('.');
  return dot > 0 && held.includes(p.slice(0, dot));
}

/**
 * Whether `caller` may write `target` or anything that lets one act as it, lock it out or end its
 * sessions (its enrollments, authenticators, MFA, API sessions, `externalId`, auth policy…): a
 * full admin may reach anyone; anyone else only an identity that is not an admin and whose every
 * permission the caller holds too (`covers`). Applied to an identity as it is and as a write would
 * leave it, it also keeps a caller from giving away a permission it lacks, or `isAdmin`.
 */
export function dominates(caller: IdentityRecord | undefined, target: Rec): boolean {
  if (caller?.isAdmin === true) return true;
  if (!caller || target.isAdmin === true) return false;
  const held: string[] = caller.permissions ?? [];
  return ((target.permissions ?? []) as string[]).every((p) => covers(held, p));
}
