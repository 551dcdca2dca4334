/**
 * Errors of cluster-mode writes, kept apart from the etcd client so the API layer can recognise
 * them without loading it on a single node.
 */

/** etcd cannot take writes now (no leader, unreachable): answered 503 with Retry-After. */
export class ClusterUnavailable extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds = 2,
  ) {
    super(message);
  }
}

/** A write whose guards kept failing because others kept changing what it read. */
export class WriteContention extends Error {}
