/** Ports for the processes a test starts besides the controller: the benchmarks' helper, shared. */
export { freePort } from '../../bench/lib/ports.js';
