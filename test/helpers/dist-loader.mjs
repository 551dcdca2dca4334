// Registers dist-hooks.mjs (why: see there). Loaded with --import after tap's own loaders, so its
// hooks run before ts-node's.
import { register } from 'node:module';

register('./dist-hooks.mjs', import.meta.url);
