import type { ClaimStrategyName } from '@asynccmd/adapter-mysql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysql } from './databases.js';
import { startGaleraCluster, type GaleraCluster } from './galera.js';
import { printTable, saveResults, type ResultRow } from './results.js';
import { expectHeld, FULL, row, Run } from './suite.js';
import { createTempServer, type TempServer } from './temp-servers.js';

/**
 * Three worker processes, one per node of a three-node Galera cluster, drain one table; every
 * execution is logged outside the queue's tables. Galera's row locks are node-local and its
 * conflicts surface as certification failures, so this is where a claim or an outcome write that
 * trusts its own node's locks would hand a command to two nodes.
 */
const SIZE = FULL ? { commands: 20_000, runs: 5 } : { commands: 2_000, runs: 2 };
const STRATEGIES: readonly ClaimStrategyName[] = ['skip-locked', 'legacy'];
/** Four slots per process and an empty handler: claims and outcome writes as dense as they get. */
const SLOTS = 4;
/**
 * A lease several heartbeats long, short enough that heartbeats which kept failing (a conflict
 * taken for an outage) would let it lapse and show as a command run twice.
 */
const TIMING = { leaseMs: 4_000, heartbeatIntervalMs: 500, pollIntervalMs: 100, reclaimIntervalMs: 300 };

describe('faults on a MariaDB Galera cluster', () => {
  const results: ResultRow[] = [];
  let cluster: GaleraCluster | null = null;
  let single: TempServer | null = null;

  beforeAll(async () => {
    cluster = await startGaleraCluster(3);
  }, 180_000);

  afterAll(async () => {
    await cluster?.dispose();
    await single?.dispose();
    printTable(`fault suite on a MariaDB Galera cluster (${FULL ? 'full' : 'reduced'} sizes)`, results);
    saveResults('galera', results);
  }, 60_000);

  /** One drain: `ports[i]` is the node worker i talks to. Returns the rate, commands per second. */
  async function drain(
    database: string,
    strategy: ClaimStrategyName,
    ports: readonly number[],
    scenario: string,
  ): Promise<number> {
    const run = await Run.open(mysql, scenario, { port: ports[0], store: { claimStrategy: strategy } });
    try {
      await run.submit(SIZE.commands, 0);
      await Promise.all(ports.map((port) => run.spawn(run.spec(TIMING, SLOTS, port))));
      const tookMs = await run.drained();
      const verdict = await run.verdict();
      const lines = run.lines();
      const storeErrors = lines.filter((l) => l.event === 'store-error');
      const byCause = new Map<string, number>();
      for (const l of storeErrors) byCause.set(l.id, (byCause.get(l.id) ?? 0) + 1);
      const rate = Math.round(SIZE.commands / (tookMs / 1000));
      results.push(
        row(
          `${scenario} (${strategy})`,
          { name: database },
          verdict,
          `drained in ${(tookMs / 1000).toFixed(1)} s (${rate}/s)`,
          `${ports.length} processes × ${SLOTS} slots, empty handler, lease ${TIMING.leaseMs} ms; ` +
            `store errors taken for outages: ${storeErrors.length}` +
            (byCause.size ? ` (${[...byCause].map(([c, n]) => `${c} × ${n}`).join(', ')})` : ''),
        ),
      );
      expectHeld(verdict, false, `${scenario} with ${strategy}`, lines);
      expect(verdict.fenced, 'outcomes fenced').toBe(0);
      return rate;
    } finally {
      await run.close();
    }
  }

  for (const strategy of STRATEGIES) {
    it(
      `${strategy}: one worker per node, ${SIZE.runs} × ${SIZE.commands} commands, 0 lost, 0 twice, 0 stuck`,
      async () => {
        const c = cluster!;
        for (let i = 0; i < SIZE.runs; i++) {
          await drain('mariadb galera (3 nodes)', strategy, c.ports, `galera drain ${i + 1}`);
        }
      },
      FULL ? 900_000 : 120_000,
    );
  }

  it(
    'the same drain on a single server, for the rate beside the cluster',
    async () => {
      single = await createTempServer('mysql');
      await single.start();
      const port = single.port;
      await drain('mariadb (one server)', 'skip-locked', [port, port, port], 'single-server drain');
    },
    FULL ? 300_000 : 60_000,
  );
});
