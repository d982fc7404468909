// A worker process for the type-limit end-to-end test: runs the limited type (IMMEDIATE, so the
// commands it submits itself are claimed by id after commit, and the others by its poll loop) on the
// store described in ASYNCCMD_E2E_WORKER (JSON), with `typeLimits`, and appends every execution's
// start and end to the log file named there (worker-spec.mjs). Runs built JS (npx tsc -b first).
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAsyncCommands } from '@asynccmd/runtime';
import { log, runUntilSigterm, spec, store } from './worker-spec.mjs';

const runtime = createAsyncCommands({
  store,
  pollIntervalMs: spec.pollIntervalMs,
  sharedPool: { concurrency: spec.concurrency },
  typeLimits: { [spec.type]: spec.limit },
  executors: [
    {
      type: spec.type,
      mode: 'IMMEDIATE',
      execute: async (_payload, ctx) => {
        log(`start ${ctx.id} ${process.pid}`);
        await sleep(spec.workMs);
        log(`end ${ctx.id} ${process.pid}`);
      },
    },
  ],
});
runUntilSigterm(runtime);
// Told to submit: its own commands, one transaction each, claimed by id right after each commit.
// A transaction the database rolled back (a deadlock; on Galera, a certification conflict) is tried
// again, as an application would.
process.stdin.once('data', () => {
  void (async () => {
    for (let i = 0; i < spec.submits; i++) {
      for (let attempt = 1; ; attempt++) {
        try {
          await runtime.client.transaction((tx, submit) => submit(spec.type, { from: process.pid, i }));
          break;
        } catch (error) {
          if (attempt >= 20) throw error;
          await sleep(5 * attempt);
        }
      }
    }
    process.stdout.write('submitted\n');
  })();
});
