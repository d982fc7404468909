import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseTarget } from '../src/db/database.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROFILES } from '../src/downstream.js';
import {
  checkCancel,
  checkDownstreamFailure,
  checkKillAfterAcceptance,
  checkProjectionExactlyOnce,
  checkUnknownResponseRetry,
} from '../src/experiment/checks.js';
import { DEMO_MAIN } from '../src/experiment/child-demo.js';
import { formatChecks, formatVariants } from '../src/experiment/report.js';
import { runVariant } from '../src/experiment/variant.js';

let dir: string;
const place = (part: string): DatabaseTarget => ({ dialect: 'sqlite', file: join(dir, `${part}.db`) });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'demo-experiment-checks-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('the failure checks of the boundary experiment', () => {
  it('(1) SIGKILL right after acceptance, restart on the same SQLite file: every accepted order reaches a terminal state', async () => {
    expect(existsSync(DEMO_MAIN), `${DEMO_MAIN} is built by tsc -b`).toBe(true);
    const result = await checkKillAfterAcceptance(place, 8);
    expect(result.observed).toMatch(/8\/8 accepted/);
    const details = result.details as {
      accepted: number;
      atKill: Record<string, number>;
      afterRestart: { counts: Record<string, number>; orders: number };
    };
    // The kill happened with work still owed: otherwise the check would prove nothing.
    expect((details.atKill.PENDING ?? 0) + (details.atKill.RUNNING ?? 0)).toBeGreaterThan(0);
    expect(details.afterRestart.orders).toBe(8);
    expect(details.afterRestart.counts.PENDING ?? 0).toBe(0);
    expect(details.afterRestart.counts.RUNNING ?? 0).toBe(0);
    expect(result.passed).toBe(true);
  }, 60_000);

  it('(2) a downstream outage: retries, a dead letter with health DOWN, then an admin retry completes it', async () => {
    const result = await checkDownstreamFailure(place);
    const details = result.details as {
      deadCommand: { status: string; failedAttempts: number };
      finalState: string;
    };
    expect(details.deadCommand.status).toBe('DEAD');
    expect(details.deadCommand.failedAttempts).toBe(3);
    expect(result.observed).toMatch(/GET \/health → 503/);
    expect(details.finalState).toBe('completed');
    expect(result.passed).toBe(true);
  });

  it('(3) retries after an unknown response with the same request id: one order, one set of commands', async () => {
    const result = await checkUnknownResponseRetry(place, 3);
    expect(result.details).toMatchObject({ orders: 1, commands: 3, statuses: [201, 201, 201] });
    expect(result.passed).toBe(true);
  });

  it('(4) cancel before start → CANCELLED; cancel of a RUNNING or finished command → 409 with the reason', async () => {
    const result = await checkCancel(place);
    const details = result.details as Record<
      string,
      { status: number; body: { error?: { message: string } } }
    >;
    expect(details.beforeStart?.status).toBe(200);
    expect(details.whileRunning?.status).toBe(409);
    expect(details.whileRunning?.body.error?.message).toMatch(/it is RUNNING/);
    expect(details.afterDone?.status).toBe(409);
    expect(details.afterDone?.body.error?.message).toMatch(/it is SUCCESS/);
    expect(result.passed).toBe(true);
    expect(formatChecks([result])).toMatch(/^PASS/);
  }, 30_000);
});

describe('the exactly-once check of the transactional projection', () => {
  it('(5) SIGKILL mid-drain of the projections, restart: each order projected exactly once, counted outside the command tables', async () => {
    const result = await checkProjectionExactlyOnce(place, 12);
    const details = result.details as {
      accepted: number;
      atKills: { committed: number; running: number }[];
      deliveriesPerOrder: Record<string, number>;
      readModel: { orders: number; totalCents: number };
      placed: { orders: number; totalCents: number };
    };
    expect(details.accepted).toBe(12);
    // Killed mid-drain each time: some projections committed, some still owed (else it proves nothing).
    expect(details.atKills).toHaveLength(3);
    for (const kill of details.atKills) {
      expect(kill.committed).toBeGreaterThan(0);
      expect(kill.committed).toBeLessThan(12);
    }
    expect(Object.values(details.deliveriesPerOrder)).toEqual(Array(12).fill(1));
    expect(details.readModel).toEqual(details.placed);
    expect(result.passed).toBe(true);
  }, 90_000);
});

describe('the side-by-side measurement', () => {
  it('runs the same small request mix against both boundaries and accounts for every accepted operation', async () => {
    const options = { orders: 40, concurrency: 4, seed: 7, profiles: DEFAULT_PROFILES };
    const sync = await runVariant({ ...options, boundary: 'synchronous', database: place('sync') });
    const split = await runVariant({ ...options, boundary: 'split', database: place('split') });
    for (const v of [sync, split]) {
      expect(v.requests).toBe(40);
      const terminal = Object.values(v.terminalByState).reduce((a, b) => a + b, 0);
      expect(terminal + v.stillPending).toBe(v.acceptedOperations);
    }
    // Same requests: the same ones are invalid on both sides.
    expect(sync.responses['400']).toBe(split.responses['400']);
    // The synchronous variant has nothing pending after its responses; the split defers work.
    expect(sync.pendingAgeMs.count).toBe(0);
    expect(split.stillPending).toBe(0);
    // Every order the synchronous variant recorded but answered 502 for is counted as invisible.
    expect(sync.incorrectOrInvisible.count).toBe(sync.responses['502'] ?? 0);
    expect(formatVariants([sync, split])).toContain('split (commands)');
  }, 60_000);
});
