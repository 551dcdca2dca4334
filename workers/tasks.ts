/**
 * Piscina worker entry of the pool (src/pool.ts): each export is a task name,
 * `pool.run('hashPassword', { password, ... })`. The tasks and their input and output types live
 * in src/; this file only gathers them, and the assignment below fails to compile when it no
 * longer implements the pool's contract (`Tasks`).
 */
import type { Tasks } from '../src/pool.js';
import { hashPassword, verifyPassword } from '../src/auth/argon2.js';
import { searchDocs } from '../src/events/search-docs.js';
import { signCsrs } from './pki.js';
import { newEnrollments } from './enrollments.js';

export { hashPassword, verifyPassword, searchDocs, signCsrs, newEnrollments };

const implemented: Tasks = { hashPassword, verifyPassword, searchDocs, signCsrs, newEnrollments };
void implemented;
