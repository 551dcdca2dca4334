/**
 * Node flags every controller runs with: `npm start` and `npm run dev` (package.json),
 * docs/cluster/compose.yaml and the benchmarks' controllers (bench/lib/controller.ts); a unit test
 * keeps them in step.
 *
 * --max-semi-space-size=64 (MiB; V8's default is 16): V8's young generation may grow to 64 MiB a
 * semi-space. A session create allocates tens of KB of short-lived objects, so at thousands a
 * second the default young generation was scavenged many times a second, each scavenge copying
 * everything still in flight: the larger one cut scavenges, their pause and the controller's CPU
 * per create. The price is memory: the young generation grows to that size under allocation
 * pressure and keeps it. Figures: docs/benchmarks.md ("2026-11-28 night").
 *
 * --min-semi-space-size=64: and starts at that size. Loading a large model at start once grew it
 * (Maps and strings); the role index now loads into typed arrays, and the creates that followed
 * ran on the small default young generation, scavenged far more often for the same allocation.
 * The price: a fresh controller holds that memory from the start (docs/benchmarks.md, session 19).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64', '--min-semi-space-size=64'];
