// @asynccmd/cli's library entry: the shape of the module `asynccmd worker --executors` loads.
export { defineWorker } from './worker-module.js';
export type { WorkerModule, WorkerRuntimeOptions } from './worker-module.js';
