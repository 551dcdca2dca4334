/**
 * Config types every controller has from its first start (decisions §2): the tunneler types under
 * our brand, and the intercept/host types SDK tunnelers read. Their ids are their names, so clients
 * that look them up by either find them. Schemas follow upstream's in structure; they require what
 * a tunneler cannot work without and leave room for the optional knobs.
 */
const port = { type: 'integer', minimum: 0, maximum: 65535 };
const portRange = {
  type: 'object',
  required: ['low', 'high'],
  properties: { low: port, high: port },
};
const protocol = { type: 'string', enum: ['tcp', 'udp'] };
const hostTerminator = {
  type: 'object',
  properties: {
    protocol,
    forwardProtocol: { type: 'boolean' },
    allowedProtocols: { type: 'array', items: protocol, minItems: 1 },
    address: { type: 'string', minLength: 1 },
    forwardAddress: { type: 'boolean' },
    allowedAddresses: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1 },
    allowedSourceAddresses: { type: 'array', items: { type: 'string', minLength: 1 } },
    port,
    forwardPort: { type: 'boolean' },
    allowedPortRanges: { type: 'array', items: portRange, minItems: 1 },
    listenOptions: { type: 'object' },
    portChecks: { type: 'array' },
    httpChecks: { type: 'array' },
  },
};

export const BUILTIN_CONFIG_TYPES: { name: string; schema: object }[] = [
  {
    name: 'mesh-tunneler-client.v1',
    schema: { type: 'object', required: ['hostname', 'port'], properties: { hostname: { type: 'string', minLength: 1 }, port } },
  },
  {
    name: 'mesh-tunneler-server.v1',
    schema: { type: 'object', required: ['hostname', 'port', 'protocol'], properties: { hostname: { type: 'string', minLength: 1 }, port, protocol } },
  },
  {
    name: 'intercept.v1',
    schema: {
      type: 'object',
      required: ['protocols', 'addresses', 'portRanges'],
      properties: {
        protocols: { type: 'array', items: protocol, minItems: 1 },
        addresses: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1 },
        portRanges: { type: 'array', items: portRange, minItems: 1 },
        dialOptions: { type: 'object' },
        sourceIp: { type: 'string' },
      },
    },
  },
  { name: 'host.v1', schema: hostTerminator },
  {
    name: 'host.v2',
    schema: { type: 'object', required: ['terminators'], properties: { terminators: { type: 'array', items: hostTerminator, minItems: 1 } } },
  },
];
