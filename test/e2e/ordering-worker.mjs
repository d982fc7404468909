// A worker process for the ordering-key end-to-end test: runs the keyed type on the store described
// in ASYNCCMD_E2E_WORKER (JSON) and appends every execution's start and end to the log file named
// there (worker-spec.mjs). Runs built JS (npx tsc -b first).
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAsyncCommands } from '@asynccmd/runtime';
import { log, runUntilSigterm, spec, store } from './worker-spec.mjs';

const runtime = createAsyncCommands({
  store,
  pollIntervalMs: spec.pollIntervalMs,
  sharedPool: { concurrency: spec.concurrency },
  executors: [
    {
      type: spec.type,
      mode: 'ASYNC_POOL',
      execute: async (payload, ctx) => {
        log(`start ${ctx.id} ${payload.key} ${payload.seq} ${process.pid}`);
        // Long enough for executions of other keys to overlap this one.
        await sleep(spec.workMs);
        log(`end ${ctx.id} ${payload.key} ${payload.seq} ${process.pid}`);
      },
    },
  ],
});
runUntilSigterm(runtime);
