// A worker process for the fault suite: drains one command type on the store described in
// ASYNCCMD_FAULT_WORKER (JSON) and writes every execution to an append-only log outside the
// queue's tables, one line per event: `<event> <command id> <pid> <epoch ms>`.
//   start   the executor began          end     the executor finished its work
//   ack     the success was recorded    fenced  the outcome write was refused (claim taken away)
//   abort   the executor's signal was aborted while it ran
//   store-error   a store operation failed and the runtime backs off (`<operation>:<errno or code>` in
//                 the id's place): what the runtime took for an outage
// With `workflow` (a workflow's steps and its batch callback), start and end carry a fifth field, the
// execution's own name (`<pid>.<n>`), which the step also leaves as its result: the one that
// committed SUCCESS is the one the table names. At its start a step reads its dependencies from
// the store and logs `early <id> <pid> <ms> <dependency>:<status>` for any that is not SUCCESS.
// A payload `{ ms }` is how long the work takes; it stops early if its signal is aborted.
// Runs built JS (npx tsc -b first). Ends when its parent goes away (stdin closes) or on SIGTERM.
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { batchCounts } from '@asynccmd/core';
import { createAsyncCommands } from '@asynccmd/runtime';

const spec = JSON.parse(process.env.ASYNCCMD_FAULT_WORKER ?? '{}');
const { [spec.store.factory]: openStore } = await import(spec.store.module);
const store = openStore(spec.store.options);

// appendFileSync opens with O_APPEND: each line lands whole even with several writers.
const log = (event, id, detail) =>
  appendFileSync(
    spec.log,
    `${event} ${id} ${process.pid} ${Date.now()}${detail === undefined ? '' : ` ${detail}`}\n`,
  );

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

// With `effects`, the executor is transactional: in its attempt's transaction it writes one row to
// the effect table (no unique constraint) and submits one follow-up of type `<type>.next`.
const effects = spec.effects;
const insertEffect =
  effects === undefined
    ? null
    : {
        postgres: (tx, id) => tx.query(`INSERT INTO ${effects.table} (command_id) VALUES ($1)`, [id]),
        mysql: (tx, id) => tx.query(`INSERT INTO ${effects.table} (command_id) VALUES (?)`, [id]),
        sqlite: async (tx, id) => {
          tx.prepare(`INSERT INTO ${effects.table} (command_id) VALUES (?)`).run(id);
        },
      }[effects.dialect];

const plain = {
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
};

const transactional = {
  type: spec.type,
  mode: spec.mode,
  transactional: true,
  execute: async ({ ms }, ctx) => {
    log('start', ctx.id);
    try {
      await work(ms, ctx.signal);
    } catch (error) {
      log('abort', ctx.id);
      throw error;
    }
    await insertEffect(ctx.tx, ctx.id);
    await ctx.submit(`${spec.type}.next`, { parent: ctx.id });
    log('end', ctx.id);
  },
};

const followUp = { type: `${spec.type}.next`, mode: spec.mode, execute: () => undefined };

// A workflow's step: its execution named in the log and in its result.
let executions = 0;
const step = {
  type: spec.type,
  mode: spec.mode,
  execute: async ({ ms }, ctx) => {
    const run = `${process.pid}.${++executions}`;
    log('start', ctx.id, run);
    // What the store says of its dependencies as it starts (a read that fails, in a cut, checks nothing).
    const dependencies = await ctx.dependencies().catch(() => []);
    for (const d of dependencies) if (d.status !== 'SUCCESS') log('early', ctx.id, `${d.id}:${d.status}`);
    try {
      await work(ms, ctx.signal);
    } catch (error) {
      log('abort', ctx.id, run);
      throw error;
    }
    ctx.setResult({ run });
    log('end', ctx.id, run);
  },
};

// The workflow's batch callback: transactional, its effect row (no unique constraint) and its
// SUCCESS commit together, so a second effect row would be a second committed run.
const callback = {
  type: `${spec.type}.callback`,
  mode: spec.mode,
  transactional: true,
  execute: async (_payload, ctx) => {
    const run = `${process.pid}.${++executions}`;
    log('start', ctx.id, run);
    const counts = batchCounts(await ctx.dependencies());
    await insertEffect(ctx.tx, ctx.id);
    ctx.setResult({ run, ...counts });
    log('end', ctx.id, run);
  },
};

const executors = spec.workflow
  ? [step, callback]
  : insertEffect === null
    ? [plain]
    : [transactional, followUp];
const logged = new Set(executors.map((e) => e.type));

// An option the spec leaves out stays at the runtime's default (JSON drops undefined ones).
const runtime = createAsyncCommands({
  store,
  leaseMs: spec.leaseMs,
  heartbeatIntervalMs: spec.heartbeatIntervalMs,
  pollIntervalMs: spec.pollIntervalMs,
  reclaimIntervalMs: spec.reclaimIntervalMs,
  ...(spec.concurrency === undefined ? {} : { sharedPool: { concurrency: spec.concurrency, queueSize: 0 } }),
  executors,
});
// Acks of the main type, or (a workflow) of its steps and callback.
const acked = (type) => (spec.workflow ? logged.has(type) : type === spec.type);
runtime.events.onKind('succeeded', (e) => acked(e.command.type) && log('ack', e.command.id));
runtime.events.onKind('fenced', (e) => acked(e.command.type) && log('fenced', e.command.id));
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
