/**
 * The router control channel protocol, version 1: JSON text frames over a WebSocket
 * (`wss://<controller>/ctrl/v1`). docs/router-protocol.md describes every message; this file is the
 * one place that knows their shapes. Everything a router sends is parsed here, strictly and with
 * bounds, before the channel looks at it: a router is a remote peer and may be hostile.
 *
 * Example (router side):
 *   → {"type":"hello","protocolVersion":1,"certChain":"-----BEGIN CERTIFICATE-----…","hostname":"er1",
 *      "protocols":{"tls":"tls:er1.example:3022"}}
 *   ← {"type":"challenge","protocolVersion":1,"nonce":"…","controllerId":"…","controllerFingerprint":"…"}
 *   → {"type":"proof","signature":"<base64 signature of proofPayload(…)>"}
 *   ← {"type":"welcome",…}            → {"type":"synced"}
 *   ← {"type":"ping","seq":1}          → {"type":"pong","seq":1}
 */
import type { RouterInterface, VersionInfo } from './presence.js';

export const PROTOCOL_VERSION = 1;
/** URL path of the WebSocket endpoint (the version is part of the path). */
export const CONTROL_PATH = '/ctrl/v1';
/** Largest frame a router may send: a certificate chain fits easily. */
export const MAX_FRAME_BYTES = 64 * 1024;

/** WebSocket close codes the controller uses (4000–4999 are application codes). */
export const CLOSE = {
  normal: 1000,
  shutdown: 1001,
  protocolError: 4000,
  authFailed: 4001,
  unsupportedVersion: 4002,
  routerDisabled: 4003,
  superseded: 4004,
  revoked: 4005,
  timeout: 4008,
} as const;

/** What the router signs: binds the nonce to this controller's TLS certificate and to the router's own certificate. */
export function proofPayload(nonce: string, controllerFingerprint: string, routerFingerprint: string): Buffer {
  return Buffer.from(`mesh-ctrl/${PROTOCOL_VERSION} proof\n${nonce}\n${controllerFingerprint}\n${routerFingerprint}`, 'utf8');
}

// ---- router → controller ------------------------------------------------------------------

export interface RouterState {
  hostname?: string;
  protocols?: Record<string, string>;
  versionInfo?: VersionInfo;
  interfaces?: RouterInterface[];
}

export type RouterMessage =
  | ({ type: 'hello'; protocolVersion: number; certChain: string; routerId?: string } & RouterState)
  | { type: 'proof'; signature: Buffer }
  | { type: 'synced' }
  | ({ type: 'state' } & RouterState)
  | { type: 'ping'; seq: number }
  | { type: 'pong'; seq: number }
  | { type: 'bye'; reason?: string };

// ---- controller → router ------------------------------------------------------------------

/** The router's own settings, as the controller holds them. */
export interface RouterSettings {
  name: string;
  cost: number;
  noTraversal: boolean;
  disabled: boolean;
  ctrlChanListeners: Record<string, string[]>;
  roleAttributes?: string[];
  isTunnelerEnabled?: boolean;
}

/** An identity whose data flows routers should trace (`PUT /identities/{id}/trace`). */
export interface TraceSpec {
  identityId: string;
  enabled: boolean;
  traceId: string;
  /** RFC 3339; the trace ends then. */
  until: string;
  channels: string[];
}

export type ControllerMessage =
  | { type: 'challenge'; protocolVersion: number; nonce: string; controllerId: string; controllerFingerprint: string }
  | {
      type: 'welcome';
      protocolVersion: number;
      routerId: string;
      kind: 'edge' | 'transit';
      controllerId: string;
      heartbeatIntervalMs: number;
      heartbeatTimeoutMs: number;
      router: RouterSettings;
      traces: TraceSpec[];
    }
  | { type: 'router-update'; router: RouterSettings }
  | { type: 'controllers'; controllers: { id: string; ctrlAddress: string }[] }
  | { type: 'trace'; trace: TraceSpec }
  | { type: 'session-removed'; ids: string[] }
  | { type: 'ping'; seq: number }
  | { type: 'pong'; seq: number }
  | { type: 'error'; code: string; message: string };

export function encode(msg: ControllerMessage): string {
  return JSON.stringify(msg);
}

// ---- parsing --------------------------------------------------------------------------------

export class ProtocolError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

const bad = (message: string) => new ProtocolError('INVALID_MESSAGE', message);

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: Obj, key: string, max: number, required: boolean): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) {
    if (required) throw bad(`${key} is required`);
    return undefined;
  }
  if (typeof v !== 'string') throw bad(`${key} must be a string`);
  if (v.length > max) throw bad(`${key} must be at most ${max} characters`);
  return v;
}

function uint(o: Obj, key: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw bad(`${key} must be a non-negative integer`);
  return v;
}

/** `host` as a DNS name or an IP literal: printable, no spaces, bounded. */
const HOSTNAME = /^[A-Za-z0-9._:[\]-]{1,253}$/;
const PROTOCOL_NAME = /^[a-z][a-z0-9+.-]{0,31}$/;
const MAX_PROTOCOLS = 16;
const MAX_INTERFACES = 64;

function parseState(o: Obj): RouterState {
  const out: RouterState = {};
  const hostname = str(o, 'hostname', 253, false);
  if (hostname !== undefined) {
    if (hostname !== '' && !HOSTNAME.test(hostname)) throw bad('hostname must be a host name or IP address');
    out.hostname = hostname;
  }
  if (o.protocols !== undefined && o.protocols !== null) {
    if (!isObj(o.protocols)) throw bad('protocols must be an object of protocol → address');
    const entries = Object.entries(o.protocols);
    if (entries.length > MAX_PROTOCOLS) throw bad(`protocols may name at most ${MAX_PROTOCOLS} protocols`);
    const protocols: Record<string, string> = {};
    for (const [k, v] of entries) {
      if (!PROTOCOL_NAME.test(k)) throw bad(`protocol name ${JSON.stringify(k.slice(0, 40))} is not valid`);
      if (typeof v !== 'string' || v.length === 0 || v.length > 256 || /[\s\x00-\x1f]/.test(v)) throw bad(`protocols.${k} must be an address (1-256 printable characters)`);
      protocols[k] = v;
    }
    out.protocols = protocols;
  }
  if (o.versionInfo !== undefined && o.versionInfo !== null) {
    if (!isObj(o.versionInfo)) throw bad('versionInfo must be an object');
    const vi = o.versionInfo;
    out.versionInfo = {
      os: str(vi, 'os', 64, false) ?? '',
      arch: str(vi, 'arch', 64, false) ?? '',
      version: str(vi, 'version', 128, false) ?? '',
      revision: str(vi, 'revision', 128, false) ?? '',
      buildDate: str(vi, 'buildDate', 64, false) ?? '',
    };
  }
  if (o.interfaces !== undefined && o.interfaces !== null) {
    if (!Array.isArray(o.interfaces)) throw bad('interfaces must be an array');
    if (o.interfaces.length > MAX_INTERFACES) throw bad(`at most ${MAX_INTERFACES} interfaces`);
    out.interfaces = o.interfaces.map((i, n) => {
      if (!isObj(i)) throw bad(`interfaces[${n}] must be an object`);
      const addresses = i.addresses ?? [];
      if (!Array.isArray(addresses) || addresses.length > 64 || addresses.some((a) => typeof a !== 'string' || a.length > 64))
        throw bad(`interfaces[${n}].addresses must be an array of addresses`);
      const num = (k: string) => (i[k] === undefined ? 0 : uint(i, k));
      const flag = (k: string) => {
        if (i[k] !== undefined && typeof i[k] !== 'boolean') throw bad(`interfaces[${n}].${k} must be a boolean`);
        return i[k] === true;
      };
      return {
        name: str(i, 'name', 64, true)!,
        hardwareAddress: str(i, 'hardwareAddress', 64, false) ?? '',
        mtu: num('mtu'),
        index: num('index'),
        isUp: flag('isUp'),
        isRunning: flag('isRunning'),
        isLoopback: flag('isLoopback'),
        isBroadcast: flag('isBroadcast'),
        isMulticast: flag('isMulticast'),
        addresses: addresses as string[],
      };
    });
  }
  return out;
}

const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** Parse one text frame from a router; throws ProtocolError with a message fit to send back. */
export function parseRouterMessage(text: string): RouterMessage {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    throw bad('a frame must hold one JSON object');
  }
  if (!isObj(o)) throw bad('a frame must hold one JSON object');
  const type = o.type;
  switch (type) {
    case 'hello': {
      const v = o.protocolVersion;
      if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad('protocolVersion must be an integer');
      if (v !== PROTOCOL_VERSION) throw new ProtocolError('UNSUPPORTED_VERSION', `protocol version ${v} is not supported; this controller speaks ${PROTOCOL_VERSION}`);
      const certChain = str(o, 'certChain', 32 * 1024, true)!;
      const routerId = str(o, 'routerId', 64, false);
      return { type, protocolVersion: v, certChain, ...(routerId ? { routerId } : {}), ...parseState(o) };
    }
    case 'proof': {
      const sig = str(o, 'signature', 2048, true)!;
      if (!BASE64.test(sig)) throw bad('signature must be base64');
      return { type, signature: Buffer.from(sig, /[-_]/.test(sig) ? 'base64url' : 'base64') };
    }
    case 'synced':
      return { type };
    case 'state':
      return { type, ...parseState(o) };
    case 'ping':
    case 'pong':
      return { type, seq: uint(o, 'seq') };
    case 'bye': {
      const reason = str(o, 'reason', 256, false);
      return reason === undefined ? { type } : { type, reason };
    }
    default:
      throw bad(`unknown message type ${JSON.stringify(typeof type === 'string' ? type.slice(0, 40) : type)}`);
  }
}
