/**
 * Events: the embedded search store under `<dataDir>/search`, served at `/search`
 * on the API listener; alerts the controller raises into it; and, when `searchExportUrl` is set,
 * the exporter that ships every document to an external Elasticsearch/OpenSearch.
 */
import path from 'node:path';
import type { EventsApp as App } from './context.js';
import type { RawRoute } from '../core/operation.js';
import { SearchStore, type IndexedDoc } from './search-store.js';
import { searchRoute } from './search-http.js';
import { Alerts } from './alerts.js';
import { Exporter } from './exporter.js';
import { Audit } from './audit.js';

export interface Events {
  search: SearchStore;
  alerts: Alerts;
  exporter?: Exporter;
  audit: Audit;
  route: RawRoute;
  close(): Promise<void>;
}

export function startEvents(app: App): Events {
  const c = app.config;
  const search = new SearchStore(path.join(path.resolve(c.dataDir), 'search'), { retentionHours: c.searchRetentionHours, maxDocsPerIndex: c.searchMaxDocsPerIndex });
  let exporter: Exporter | undefined;
  if (c.searchExportUrl) {
    exporter = new Exporter({
      url: c.searchExportUrl,
      username: c.searchExportUsername,
      password: c.searchExportPassword,
      batch: c.searchExportBatch,
      buffer: c.searchExportBuffer,
      flushMs: c.searchExportFlushMs,
      log: app.log,
    });
    const ex = exporter;
    search.on('indexed', (docs: IndexedDoc[]) => ex.enqueue(docs));
  }
  const alerts = new Alerts(app, search, { debounceMs: c.alertDebounceMs, scanSpacing: c.alertScanSpacing, certExpiryDays: c.alertCertExpiryDays });
  alerts.start();
  const audit = new Audit({
    dataDir: path.resolve(c.dataDir), search, log: app.log,
    webhookUrl: c.auditWebhookUrl, webhookSecret: c.auditWebhookSecret, webhookQueue: c.auditWebhookQueue, webhookBatch: c.auditWebhookBatch,
    webhookAttempts: c.auditWebhookAttempts, webhookRetryMs: c.auditWebhookRetryMs, webhookTimeoutMs: c.auditWebhookTimeoutMs,
  });
  return {
    search,
    alerts,
    exporter,
    audit,
    route: searchRoute(app, search),
    async close() {
      await alerts.close();
      await audit.close();
      await exporter?.close();
      await search.close();
    },
  };
}
