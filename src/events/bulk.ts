/**
 * The Elasticsearch `_bulk` request body (NDJSON): action lines `{"index":{…}}`, `{"create":{…}}`,
 * `{"delete":{…}}` (and `update`, answered per item as unsupported), each of the first two
 * followed by its document. Shape errors of the request itself throw SearchError (400 for the
 * whole request, as Elasticsearch does); problems of one item become that item's error.
 */
import { SearchError } from './query.js';
import { checkIndexName } from './search-store.js';

export interface BulkItem {
  action: 'index' | 'create' | 'delete' | 'update';
  index: string;
  id?: string;
  source?: Record<string, unknown>;
  /** Set when this item is refused before it reaches the store. */
  error?: { status: number; type: string; reason: string };
}

/** Deeper documents than any event needs; bounded so storing them can never exhaust the stack. */
const MAX_DEPTH = 32;

function tooDeep(v: unknown): boolean {
  const stack: [unknown, number][] = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    if (d >= MAX_DEPTH) return true;
    for (const c of Array.isArray(x) ? x : Object.values(x)) stack.push([c, d + 1]);
  }
  return false;
}

const malformed = (line: number, why: string) => new SearchError(400, 'illegal_argument_exception', `Malformed action/metadata line [${line}], ${why}`);

/** Indices only the controller itself writes (alerts). */
const RESERVED_PREFIX = 'mesh.';

export function parseBulk(text: string, defaultIndex: string | undefined): BulkItem[] {
  const lines = text.split('\n');
  const items: BulkItem[] = [];
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i].trim();
    if (raw === '') continue;
    const lineNo = i + 1;
    let action: unknown;
    try {
      action = JSON.parse(raw);
    } catch {
      throw malformed(lineNo, 'expected START_OBJECT but found an unparsable line');
    }
    if (action === null || typeof action !== 'object' || Array.isArray(action)) throw malformed(lineNo, 'expected START_OBJECT');
    const keys = Object.keys(action);
    if (keys.length !== 1) throw malformed(lineNo, `expected one action but found [${keys.join(', ')}]`);
    const kind = keys[0];
    if (!['index', 'create', 'delete', 'update'].includes(kind)) throw malformed(lineNo, `expected one of [create, delete, index, update] but found [${kind}]`);
    const meta = (action as Record<string, any>)[kind] ?? {};
    if (typeof meta !== 'object' || Array.isArray(meta)) throw malformed(lineNo, 'expected an object of action metadata');
    const index = meta._index ?? defaultIndex;
    if (typeof index !== 'string') throw new SearchError(400, 'action_request_validation_exception', `Validation Failed: 1: index is missing for the action on line [${lineNo}];`);
    const id = meta._id === undefined || meta._id === null ? undefined : String(meta._id);
    const item: BulkItem = { action: kind as BulkItem['action'], index, id };
    if (kind !== 'delete') {
      // The document line.
      i++;
      while (i < lines.length && lines[i].trim() === '') i++;
      if (i >= lines.length) throw new SearchError(400, 'illegal_argument_exception', `The bulk request is missing the document of the action on line [${lineNo}]`);
      let source: unknown;
      try {
        source = JSON.parse(lines[i]);
      } catch (e) {
        item.error = { status: 400, type: 'document_parsing_exception', reason: `[${i + 1}:1] failed to parse: ${(e as Error).message}` };
      }
      if (!item.error && (source === null || typeof source !== 'object' || Array.isArray(source)))
        item.error = { status: 400, type: 'document_parsing_exception', reason: `[${i + 1}:1] the document must be a JSON object` };
      else if (!item.error && tooDeep(source))
        item.error = { status: 400, type: 'document_parsing_exception', reason: `[${i + 1}:1] the document is nested more than ${MAX_DEPTH} levels deep` };
      else if (!item.error) item.source = source as Record<string, unknown>;
    }
    const bad = checkIndexName(index);
    if (!item.error && bad) item.error = { status: 400, type: 'invalid_index_name_exception', reason: `Invalid index name [${index}], ${bad}` };
    if (!item.error && index.startsWith(RESERVED_PREFIX))
      item.error = { status: 403, type: 'security_exception', reason: `index [${index}] is written by the controller only (indices ${RESERVED_PREFIX}* are reserved)` };
    if (!item.error && id !== undefined && (id.length === 0 || Buffer.byteLength(id) > 512))
      item.error = { status: 400, type: 'illegal_argument_exception', reason: `id [${id}] is too long, must be no longer than 512 bytes` };
    if (!item.error && kind === 'update')
      item.error = { status: 400, type: 'illegal_argument_exception', reason: 'update actions are not supported by the embedded search store; send the whole document with index' };
    items.push(item);
  }
  return items;
}
