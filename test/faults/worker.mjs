// A worker process for the fault suite: drains one command type on the store described in
// ASYNCCMD_FAULT_WORKER (JSON) and writes every execution to an append-only log outside the
// queue's tables, one line per event: `<event> <command id> <pid> <epoch ms>`.
//   start   the executor began          end     the executor finished its work
//   ack     the success was recorded    fenced  the outcome write was refused (claim taken away)
//   abort   the executor's signal was aborted while it ran
//   store-error   a store operation failed and the runtime backs off (`<operation>:<errno or code>` in
//                 the id's place): what the runtime took for an outage
// A payload `{ ms }` is how long the work takes; it stops early if its signal is aborted.
// Runs built JS (npx tsc -b first). Ends when its parent goes away (stdin closes) or on SIGTERM.
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { createAsyncCommands } from '@asynccmd/runtime';

const spec = JSON.parse(process.env.ASYNCCMD_FAULT_WORKER ?? '{}');
const { [spec.store.factory]: openStore } = await import(spec.store.module);
const store = openStore(spec.store.options);

// appendFileSync opens with O_APPEND: each line lands whole even with several writers.
const log = (event, id) => appendFileSync(spec.log, `${event} ${id} ${process.pid} ${Date.now()}\n`);

function work(ms, signal) {
  return new Promise((resolve, reject) => {
    if (ms <= 0) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const runtime = createAsyncCommands({
  store,
  leaseMs: spec.leaseMs,
  heartbeatIntervalMs: spec.heartbeatIntervalMs,
  pollIntervalMs: spec.pollIntervalMs,
  reclaimIntervalMs: spec.reclaimIntervalMs,
  sharedPool: { concurrency: spec.concurrency, queueSize: 0 },
  executors: [
    {
      type: spec.type,
      mode: spec.mode,
      execute: async ({ ms }, ctx) => {
        log('start', ctx.id);
        try {
          await work(ms, ctx.signal);
        } catch (error) {
          log('abort', ctx.id);
          throw error;
        }
        log('end', ctx.id);
      },
    },
  ],
});
runtime.events.onKind('succeeded', (e) => log('ack', e.command.id));
runtime.events.onKind('fenced', (e) => log('fenced', e.command.id));
runtime.events.onKind('store-error', (e) =>
  log('store-error', `${e.operation}:${e.error?.errno ?? e.error?.code ?? 'other'}`),
);

let stopping = false;
async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  await runtime.stop({ timeoutMs: 2_000 }).catch(() => undefined);
  process.exit(code);
}
process.on('SIGTERM', () => void shutdown(0));
process.stdin.on('close', () => void shutdown(1));
process.stdin.resume();

runtime.start();
process.stdout.write('ready\n');
