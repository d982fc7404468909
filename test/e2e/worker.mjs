// A worker process for the end-to-end suite: runs one executor type on the store described in
// ASYNCCMD_E2E_WORKER (JSON) and reports on stdout. Runs built JS (npx tsc -b first).
import process from 'node:process';
import { setInterval } from 'node:timers';
import { createAsyncCommands } from '@asynccmd/runtime';

const spec = JSON.parse(process.env.ASYNCCMD_E2E_WORKER ?? '{}');
const { [spec.store.factory]: openStore } = await import(spec.store.module);
const store = openStore(spec.store.options);

const runtime = createAsyncCommands({
  store,
  leaseMs: spec.leaseMs,
  pollIntervalMs: spec.pollIntervalMs,
  executors: [
    {
      type: spec.type,
      mode: 'ASYNC_POOL',
      // Never finishes on its own: the test kills this process while it runs.
      execute: (_payload, ctx) => {
        process.stdout.write(`started ${ctx.id}\n`);
        return new Promise(() => setInterval(() => undefined, 1_000));
      },
    },
  ],
});
runtime.start();
process.stdout.write('ready\n');
