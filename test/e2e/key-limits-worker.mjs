// A worker process for the per-key end-to-end test: runs a type with `fairShare` by tenant and a
// type with `keyLimits` per customer (ASYNC_POOL) on the store described in ASYNCCMD_E2E_WORKER
// (JSON), and appends every execution's start and end, with its type and key, to the log file
// named there (worker-spec.mjs). Runs built JS (npx tsc -b first).
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAsyncCommands } from '@asynccmd/runtime';
import { log, runUntilSigterm, spec, store } from './worker-spec.mjs';

const executor = (type, keyOf) => ({
  type,
  mode: 'ASYNC_POOL',
  execute: async (payload, ctx) => {
    log(`start ${type} ${keyOf(payload)} ${ctx.id} ${process.pid}`);
    await sleep(spec.workMs);
    log(`end ${type} ${keyOf(payload)} ${ctx.id} ${process.pid}`);
  },
});

const runtime = createAsyncCommands({
  store,
  pollIntervalMs: spec.pollIntervalMs,
  // The default shared pool and its adaptive queue: fairness is of claims (docs/flow-control.md).
  fairShare: { [spec.fairType]: { key: 'tenant' } },
  keyLimits: { [spec.cappedType]: { key: 'customerId', maxRunning: spec.perCustomer } },
  executors: [executor(spec.fairType, (p) => p.tenant), executor(spec.cappedType, (p) => p.customerId)],
});
runUntilSigterm(runtime);
