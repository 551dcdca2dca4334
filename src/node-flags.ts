/**
 * Node flags every controller runs with: `npm start` and `npm run dev` (package.json),
 * docs/cluster/compose.yaml and the benchmarks' controllers (bench/lib/controller.ts); a unit test
 * keeps them in step.
 *
 * --max-semi-space-size=64 (MiB; V8's default is 16): V8's young generation may grow to 64 MiB a
 * semi-space. A session create allocates ~32 KB of short-lived objects, so at thousands a second
 * the default young generation was scavenged every ~50 ms, each scavenge copying everything still
 * in flight. Side by side on bench:policy's large model (2026-11-28, 256 clients): 74 → 18
 * scavenges and 13.9 → 5.0 µs of scavenge pause per create, 154 → 137 µs of controller CPU per
 * create. The price is memory: the young generation grows to that size under allocation pressure
 * (loading that model at start is enough) and keeps it, ~110 MB more RSS (511 against 400 MB after
 * the start, 576 against 458 MB after the creates); a fresh controller is unchanged (152 against
 * 154 MB).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
