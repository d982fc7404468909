// A process for the end-to-end suite's shutdown test: starts a runtime on the store described in
// ASYNCCMD_E2E_WORKER (JSON), submits a command of each mode, waits for them, stops with the
// default timeout and then does nothing more: the process must end on its own. Runs built JS
// (npx tsc -b first).
import process from 'node:process';
import { createAsyncCommands } from '@asynccmd/runtime';

const spec = JSON.parse(process.env.ASYNCCMD_E2E_WORKER ?? '{}');
const { [spec.store.factory]: openStore } = await import(spec.store.module);

const modes = ['IMMEDIATE', 'ASYNC_POOL', 'SCHEDULED'];
let ran = 0;
let allRan = () => undefined;
const finished = new Promise((resolve) => (allRan = resolve));
const runtime = createAsyncCommands({
  store: openStore(spec.store.options),
  pollIntervalMs: 50,
  // Every background service runs (retention keeps a day: it deletes nothing the suite reads).
  retention: { olderThanMs: 86_400_000, intervalMs: 50 },
  executors: modes.map((mode) => ({
    type: `stop.${mode}`,
    mode,
    execute: () => {
      if (++ran === modes.length) allRan();
    },
  })),
});
runtime.start();
await runtime.client.transaction(async (_tx, submit) => {
  for (const mode of modes) await submit(`stop.${mode}`, {});
});
await finished;
await runtime.stop();
process.stdout.write('stopped\n');
// What still holds the event loop, for the test's message should the process not end.
process.stderr.write(`active after stop: ${JSON.stringify(process.getActiveResourcesInfo())}\n`);
