/**
 * What the events layer needs of the application, from the layers below it. The worker pool
 * (src/pool.ts) lies above: this layer names only the tasks it runs, and the composition
 * (src/app.ts) passes the real pool. The API layer's `App` (src/api/context.ts) extends this.
 */
import type { ApiSessions } from '../auth/api-sessions.js';
import type { PasswordApp, PasswordHashing } from '../auth/passwords.js';
import type { Pki } from '../pki/bootstrap.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { SearchInput, SearchOutput } from './search-docs.js';

export interface EventsApp extends PasswordApp {
  /** Password checks of the search endpoint's users, and searches, off the event loop. */
  pool: PasswordHashing & { run(task: 'searchDocs', input: SearchInput): Promise<SearchOutput> };
  /** The search endpoint also takes API-session tokens. */
  sessions: ApiSessions;
  pki: Pki;
  policy: PolicyEngine;
}
