import { addJobsInTx } from '../baselines/graphile.js';
import { pgBossSubmitter } from '../baselines/pg-boss.js';
import { inTransaction, pgPool } from '../pg.js';
import { BENCH_TYPE, preciseNow, type BenchPayload } from '../protocol.js';
import { runChild, readSpec, send } from './child.js';

/**
 * What a soak submitter runs: `rate` commands/s for `durationMs`, `perTransaction` per transaction,
 * each system's batch submit (asynccmd's submitMany, graphile-worker's add_jobs, pg-boss's insert).
 */
export interface SoakSubmitterSpec {
  /** `schema`: the PostgreSQL schema, or the MariaDB database of asynccmd-mysql. */
  readonly system: {
    readonly kind: 'asynccmd-pg' | 'asynccmd-mysql' | 'graphile' | 'pg-boss';
    readonly schema: string;
  };
  readonly rate: number;
  readonly durationMs: number;
  readonly perTransaction: number;
  readonly clients: number;
}

interface BatchSubmitter {
  submit(payloads: readonly BenchPayload[]): Promise<void>;
  close(): Promise<void>;
}

async function prepare(spec: SoakSubmitterSpec): Promise<BatchSubmitter> {
  const { kind, schema } = spec.system;
  if (kind === 'asynccmd-pg' || kind === 'asynccmd-mysql') {
    const { benchRuntime, openStore } = await import('../systems/asynccmd.js');
    const store = await openStore(
      kind === 'asynccmd-pg' ? { kind, schema } : { kind, database: schema, claimStrategy: 'skip-locked' },
      spec.clients,
    );
    const runtime = benchRuntime(store, { concurrency: spec.clients });
    return {
      // One application transaction submitting its commands through the client's batch submit.
      submit: (payloads) =>
        runtime.client.transaction(async (tx) => {
          await runtime.client.submitMany(
            tx,
            payloads.map((payload) => ({ type: BENCH_TYPE, payload })),
          );
        }),
      close: () => runtime.stop(),
    };
  }
  if (kind === 'graphile') {
    const pool = pgPool(spec.clients);
    return {
      // Its batch enqueue, add_jobs, in the caller's transaction.
      submit: (payloads) => inTransaction(pool, (client) => addJobsInTx(client, schema, payloads)),
      close: () => pool.end(),
    };
  }
  const boss = await pgBossSubmitter(schema, spec.clients + 1);
  return { submit: (payloads) => boss.insert(payloads), close: () => boss.stop() };
}

/**
 * Child process of the soak: submits at a steady rate from `clients` concurrent clients, each
 * transaction carrying up to `perTransaction` commands (payload: seq and when its submit began),
 * until `durationMs` has passed; on each `window` message it reports the commands committed so far.
 */
runChild(async () => {
  const spec = readSpec<SoakSubmitterSpec>();
  const submitter = await prepare(spec);
  let committed = 0;
  let resolveStop: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (resolveStop = resolve));
  const started = new Promise<void>((resolve) => {
    process.on('message', (m: { type: string }) => {
      if (m.type === 'go') resolve();
      else if (m.type === 'stop') resolveStop();
      else if (m.type === 'window') void send({ type: 'window', total: committed, latency: [] });
    });
  });
  await send({ type: 'ready' });
  await started;
  const t0 = performance.now();
  let taken = 0;
  let done = false;
  void stopped.then(() => (done = true));
  await Promise.all(
    Array.from({ length: spec.clients }, async () => {
      while (!done) {
        const elapsed = performance.now() - t0;
        if (elapsed >= spec.durationMs) break;
        const due = Math.floor((spec.rate * elapsed) / 1000);
        if (taken >= due) {
          // The next command falls due in (taken + 1) / rate seconds from the start.
          await new Promise((r) => setTimeout(r, Math.max(1, ((taken + 1) * 1000) / spec.rate - elapsed)));
          continue;
        }
        const n = Math.min(spec.perTransaction, due - taken);
        const first = taken + 1;
        taken += n;
        const at = preciseNow();
        await submitter.submit(Array.from({ length: n }, (_, i) => ({ seq: first + i, at })));
        committed += n;
      }
    }),
  );
  await stopped;
  await submitter.close();
});
