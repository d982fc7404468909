// A worker process for the ordering-key end-to-end test: runs the keyed type on the store described
// in ASYNCCMD_E2E_WORKER (JSON) and appends every execution's start and end to the log file named
// there (O_APPEND: lines of all processes interleave whole, in the order they happened). Runs built
// JS (npx tsc -b first).
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAsyncCommands } from '@asynccmd/runtime';

const spec = JSON.parse(process.env.ASYNCCMD_E2E_WORKER ?? '{}');
const { [spec.store.factory]: openStore } = await import(spec.store.module);
const store = openStore(spec.store.options);
const log = (line) => appendFileSync(spec.log, `${line}\n`);

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
process.once('SIGTERM', () => {
  void runtime
    .stop({ timeoutMs: 5_000 })
    .then(() => store.close())
    .then(() => process.exit(0));
});
runtime.start();
process.stdout.write('ready\n');
