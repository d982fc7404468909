import { addJobInTx } from '../baselines/graphile.js';
import { insertOne, insertOneRoundTrip } from '../baselines/raw-sql-pg.js';
import { inTransaction, pgPool } from '../pg.js';
import type { BenchPayload, SystemSpec } from '../protocol.js';

/** Submits one command per call in its own transaction; resolves once it has committed. */
export interface Submitter {
  submit(payload: BenchPayload): Promise<void>;
  close(): Promise<void>;
}

export async function prepareSubmitter(system: SystemSpec, clients: number): Promise<Submitter> {
  switch (system.kind) {
    case 'raw-pg': {
      const pool = await warmPool(clients);
      if (system.oneRoundTrip === true) {
        return {
          submit: (payload) => insertOneRoundTrip(pool, system.schema, payload),
          close: () => pool.end(),
        };
      }
      return {
        submit: (payload) => inTransaction(pool, (c) => insertOne(c, system.schema, payload)),
        close: () => pool.end(),
      };
    }
    case 'graphile': {
      const pool = await warmPool(clients);
      return {
        submit: (payload) => inTransaction(pool, (c) => addJobInTx(c, system.schema, payload)),
        close: () => pool.end(),
      };
    }
    case 'sidequest': {
      const { sidequestSubmitter } = await import('../baselines/sidequest.js');
      return sidequestSubmitter(system.database);
    }
    case 'asynccmd-pg':
    case 'asynccmd-mysql':
    case 'asynccmd-sqlite': {
      const { benchRuntime, openStore, submitOne } = await import('./asynccmd.js');
      const runtime = benchRuntime(await openStore(system, clients), { concurrency: clients });
      return {
        submit: (payload) => submitOne(runtime, payload),
        close: () => runtime.stop(),
      };
    }
    default:
      throw new Error(`no submitter for ${system.kind} yet`);
  }
}

/** A pool with every connection already open, so connecting is not part of what is timed. */
async function warmPool(size: number): Promise<ReturnType<typeof pgPool>> {
  const pool = pgPool(size);
  const clients = await Promise.all(Array.from({ length: size }, () => pool.connect()));
  for (const c of clients) c.release();
  return pool;
}
