import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandRecord } from '@asynccmd/core';
import { createPostgresStore, type PostgresStoreOptions } from '@asynccmd/adapter-postgres';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { FaultDatabase, FaultTarget, OpenOptions } from './databases.js';
import { check, readExecutionLog, type LogLine, type Verdict } from './execution-log.js';
import { LoopbackProxy } from './proxy.js';
import { printTable, saveResults, type ResultRow } from './results.js';
import { createTempServer, type TempServer } from './temp-servers.js';
import { failoverCost, ReplicatedPostgres } from './standby.js';
import { killWorker, startWorker, stopWorkers, type WorkerProcess, type WorkerSpec } from './workers.js';

/** `ASYNCCMD_FAULTS=full` (npm run test:faults) runs the full sizes; npm test runs reduced ones. */
export const FULL = process.env.ASYNCCMD_FAULTS === 'full';

const SIZES = FULL
  ? {
      kill: { commands: 5_000, workMs: 20, kills: 5, everyMs: 1_500 },
      cut: { commands: 5_000, workMs: 20, cuts: 3, cutMs: 3_000, everyMs: 2_000 },
      freeze: { commands: 1_000, workMs: 20 },
      contention: { processes: 8, commands: 50_000, concurrency: 4 },
      server: { commands: 5_000, workMs: 20, faults: 3, everyMs: 3_000 },
      failover: { commands: 5_000, workMs: 20, afterMs: 3_000 },
    }
  : {
      kill: { commands: 1_200, workMs: 20, kills: 3, everyMs: 1_000 },
      cut: { commands: 1_200, workMs: 20, cuts: 2, cutMs: 1_500, everyMs: 1_000 },
      freeze: { commands: 300, workMs: 20 },
      contention: { processes: 4, commands: 2_000, concurrency: 4 },
      server: { commands: 1_000, workMs: 20, faults: 1, everyMs: 1_000 },
      failover: { commands: 800, workMs: 20, afterMs: 1_000 },
    };

/** Three processes with two slots each, as a small deployment would run. */
const WORKERS = 3;
const SLOTS = 2;
/** Short leases so a dead or frozen worker's commands come back within about 1.5 s. */
const QUICK = { leaseMs: 1_000, heartbeatIntervalMs: 250, pollIntervalMs: 100, reclaimIntervalMs: 200 };
/** A lease longer than any cut, so a cut alone never makes a live command look dead. */
const PATIENT = { leaseMs: 6_000, heartbeatIntervalMs: 1_000, pollIntervalMs: 100, reclaimIntervalMs: 500 };
/**
 * Outlives a server restart or crash recovery (up to about 4 s on a loaded machine), so that only
 * a write the server lost can make a re-run: a live command's lease must not lapse while it is down.
 */
const SERVER_FAULT = {
  leaseMs: 8_000,
  heartbeatIntervalMs: 1_000,
  pollIntervalMs: 100,
  reclaimIntervalMs: 300,
};
/**
 * Outlives a failover (crash, promotion, proxy switch: about a second here), so that only a write
 * the standby had not received makes a re-run: a live command's lease must not lapse meanwhile.
 */
const FAILOVER = { leaseMs: 6_000, heartbeatIntervalMs: 1_000, pollIntervalMs: 100, reclaimIntervalMs: 300 };
const TYPE = 'faults.work';
const SCENARIO_TIMEOUT_MS = FULL ? 900_000 : 120_000;
/** How long a drain may take before what is left counts as stuck. */
const DRAIN_DEADLINE_MS = FULL ? 600_000 : 60_000;

/** One scenario's run: its own namespace, execution log and worker processes, all gone at close. */
export class Run {
  readonly workers: WorkerProcess[] = [];
  readonly committed: string[] = [];
  readonly dir = mkdtempSync(join(tmpdir(), 'asynccmd-faults-'));
  readonly log = join(this.dir, 'executions.log');
  proxy: LoopbackProxy | null = null;

  private constructor(readonly target: FaultTarget) {}

  static async open(db: FaultDatabase, scenario: string, on?: OpenOptions): Promise<Run> {
    const namespace = `faults_${scenario}_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
    return new Run(await db.open(namespace, on));
  }

  /** Commits `count` commands of `workMs` each, 500 per transaction; returns their ids. */
  async submit(count: number, workMs: number): Promise<string[]> {
    const { store } = this.target;
    const ids: string[] = [];
    for (let i = 0; i < count; i += 500) {
      const n = Math.min(500, count - i);
      const batch = Array.from({ length: n }, () => ({
        type: TYPE,
        payloadJson: JSON.stringify({ ms: workMs }),
        maxRetry: 5,
      }));
      ids.push(...(await store.transaction((tx) => store.insert(tx, batch))).map(String));
    }
    this.committed.push(...ids);
    return ids;
  }

  spec(timing: typeof QUICK, concurrency = SLOTS, port?: number): WorkerSpec {
    const store = this.target.workerStore(port);
    return { store, type: TYPE, log: this.log, concurrency, mode: 'ASYNC_POOL', ...timing };
  }

  async spawn(spec: WorkerSpec): Promise<WorkerProcess> {
    const worker = await startWorker(spec);
    this.workers.push(worker);
    return worker;
  }

  lines(): LogLine[] {
    return readExecutionLog(this.log);
  }

  /** Resolves once no command of the run is PENDING or RUNNING, or at the deadline. */
  async drained(): Promise<number> {
    const started = Date.now();
    while (Date.now() - started < DRAIN_DEADLINE_MS) {
      try {
        const { counts } = await this.target.store.stats(await this.target.store.now());
        const open = counts.filter((c) => c.status === 'PENDING' || c.status === 'RUNNING');
        if (open.every((c) => c.count === 0)) break;
      } catch {
        // A connection of the test's own store that did not survive a server restart.
      }
      await sleep(250);
    }
    return Date.now() - started;
  }

  /** Stops the workers, then compares the log with the table. */
  async verdict(): Promise<Verdict> {
    await stopWorkers(this.workers);
    const rows: CommandRecord[] = [];
    for (let i = 0; i < this.committed.length; i += 1_000) {
      rows.push(...(await this.target.store.getMany(this.committed.slice(i, i + 1_000))));
    }
    return check(this.committed, this.lines(), rows);
  }

  async close(): Promise<void> {
    try {
      await stopWorkers(this.workers);
      await this.proxy?.stop();
      await this.target.dispose();
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

export function row(
  scenario: string,
  db: Pick<FaultDatabase, 'name'> | { readonly name: string },
  verdict: Verdict,
  recovery: string,
  note: string,
): ResultRow {
  return {
    scenario,
    database: db.name,
    committed: verdict.committed,
    lost: verdict.lost.length,
    twice: verdict.twice.length,
    stuck: verdict.stuck.length,
    interrupted: verdict.interrupted,
    fenced: verdict.fenced,
    recovery,
    note,
  };
}

/** The loss and stuck rules every scenario obeys; twice only where at-least-once can cause it. */
export function expectHeld(
  verdict: Verdict,
  twiceAllowed: boolean,
  context: string,
  lines: readonly LogLine[],
): void {
  expect(verdict.lost, `lost ${context}\n${evidence(verdict.lost, lines)}`).toEqual([]);
  expect(verdict.stuck, `stuck ${context}\n${evidence(verdict.stuck, lines)}`).toEqual([]);
  if (!twiceAllowed) {
    expect(verdict.twice, `executed twice ${context}\n${evidence(verdict.twice, lines)}`).toEqual([]);
  }
}

/** The log lines of `ids`, for a failure message. */
function evidence(ids: readonly string[], lines: readonly LogLine[]): string {
  const wanted = new Set(ids.slice(0, 10));
  return lines
    .filter((l) => wanted.has(l.id))
    .map((l) => `${l.event} ${l.id} pid ${l.pid} at ${l.at}`)
    .join('\n');
}

const ms = (n: number) => `${Math.round(n)} ms`;

/** The largest of `values` as "N ms", or "–" when there is none. */
function worst(values: readonly number[]): string {
  return values.length === 0 ? '–' : ms(Math.max(...values));
}

/**
 * The fault suite: real worker processes (worker.mjs) draining one table, faults injected from
 * outside, every execution written by the handler to a log outside the queue's tables, and a
 * checker that compares what was committed, what ran and what the table says at the end.
 */
export function describeFaults(db: FaultDatabase): void {
  describe(`faults on ${db.name}`, () => {
    const results: ResultRow[] = [];
    let run: Run | null = null;

    afterEach(async () => {
      await run?.close();
      run = null;
    });
    let temp: TempServer | null = null;
    afterAll(async () => {
      await temp?.dispose();
      printTable(`fault suite on ${db.name} (${FULL ? 'full' : 'reduced'} sizes)`, results);
      saveResults(db.name, results);
    });

    // SCHEDULED too: the default mode runs a round's commands before their outcomes are written.
    it.each([
      ['ASYNC_POOL', `${WORKERS} processes × ${SLOTS} slots`],
      ['SCHEDULED', `${WORKERS} processes, SCHEDULED (one at a time, adaptive claims)`],
    ] as const)(
      'SIGKILL of %s workers in a loop during a drain: nothing lost or stuck, orphans run elsewhere',
      async (mode, shape) => {
        const size = SIZES.kill;
        run = await Run.open(db, 'kill');
        const r = run;
        await r.submit(size.commands, size.workMs);
        const spec: WorkerSpec = { ...r.spec(QUICK), mode };
        const alive = await Promise.all(Array.from({ length: WORKERS }, () => r.spawn(spec)));
        const kills: { pid: number; at: number }[] = [];
        for (let k = 0; k < size.kills; k++) {
          await sleep(size.everyMs);
          const victim = alive.splice(k % alive.length, 1)[0]!;
          kills.push({ pid: victim.pid, at: Date.now() });
          await killWorker(victim);
          alive.push(await r.spawn(spec));
        }
        await r.drained();
        const verdict = await r.verdict();
        // Recovery: from a kill to the moment the last command it had begun and not finished
        // started again in another process.
        const lines = r.lines();
        const recoveries: number[] = [];
        /** Commands a killed worker finished without recording the success (per worker, then all). */
        const unacked = new Set<string>();
        for (const kill of kills) {
          const open = new Map<string, number>();
          const finished = new Set<string>();
          for (const l of lines) {
            if (l.pid !== kill.pid) continue;
            if (l.event === 'start') open.set(l.id, l.at);
            else if (l.event === 'end') {
              open.delete(l.id);
              finished.add(l.id);
            } else if (l.event === 'ack') finished.delete(l.id);
          }
          for (const id of finished) unacked.add(id);
          const back = [...open.keys()].map(
            (id) => lines.find((l) => l.event === 'start' && l.id === id && l.at >= kill.at)?.at ?? Infinity,
          );
          if (back.length > 0) recoveries.push(Math.max(...back) - kill.at);
        }
        results.push(
          row(
            `${size.kills} × SIGKILL of a ${mode === 'SCHEDULED' ? 'SCHEDULED ' : ''}worker`,
            db,
            verdict,
            `orphans back in ≤ ${worst(recoveries)}`,
            `${shape}, ${size.workMs} ms commands, lease ${QUICK.leaseMs} ms`,
          ),
        );
        // A kill between the end of the work and the commit of its success re-runs it: at-least-once.
        expectHeld(verdict, true, `after ${size.kills} kills`, r.lines());
        expect(recoveries.every(Number.isFinite), 'every orphan started again elsewhere').toBe(true);
        // ...and only such a command: one whose killed worker had finished it without recording it.
        const unexplained = verdict.twice.filter((id) => !unacked.has(id));
        const histories = (await r.target.store.getMany(unexplained)).map((c) => ({
          id: c.id,
          history: c.history.map((h) => [h.instance, h.outcome, h.startedAt, h.finishedAt]),
        }));
        expect(
          unexplained,
          `twice with no kill to explain it; kills ${JSON.stringify(kills)}; ${evidence(unexplained, lines)}\n${JSON.stringify(histories)}`,
        ).toEqual([]);
      },
      SCENARIO_TIMEOUT_MS,
    );

    if (db.server) {
      const server = db.server;
      it(
        'all connections cut through a loopback proxy mid-drain: nothing lost, stuck or run twice',
        async () => {
          const size = SIZES.cut;
          run = await Run.open(db, 'cut');
          const r = run;
          r.proxy = new LoopbackProxy(server);
          await r.proxy.start();
          await r.submit(size.commands, size.workMs);
          const spec = r.spec(PATIENT, SLOTS, r.proxy.port);
          await Promise.all(Array.from({ length: WORKERS }, () => r.spawn(spec)));
          const restored: number[] = [];
          for (let c = 0; c < size.cuts; c++) {
            await sleep(size.everyMs);
            r.proxy.cut(size.cutMs);
            await sleep(size.cutMs);
            restored.push(Date.now());
          }
          await r.drained();
          const verdict = await r.verdict();
          // Recovery: from the end of a cut to the first success recorded after it.
          const acks = r.lines().filter((l) => l.event === 'ack');
          const resumed = restored.map((at) => (acks.find((l) => l.at >= at)?.at ?? Infinity) - at);
          // A fenced outcome here can only be a retried write whose first try had landed, its reply
          // lost in the cut: the record says the same process succeeded with that claim.
          const fenced = r.lines().filter((l) => l.event === 'fenced');
          const records = await r.target.store.getMany(fenced.map((l) => l.id));
          const ownSuccess = fenced.filter((l) =>
            records
              .find((c) => String(c.id) === l.id)
              ?.history.some((h) => h.outcome === 'succeeded' && h.instance?.includes(`/${l.pid}/`)),
          ).length;
          results.push(
            row(
              `${size.cuts} × all connections cut for ${size.cutMs / 1000} s`,
              db,
              verdict,
              `resumed ≤ ${worst(resumed)} after each cut`,
              `${WORKERS} processes × ${SLOTS} slots through a proxy; no restart; lease ${PATIENT.leaseMs} ms; fenced: ${ownSuccess} of ${fenced.length} had landed before (reply lost)`,
            ),
          );
          expectHeld(verdict, false, `after ${size.cuts} cuts`, r.lines());
          expect(resumed.every(Number.isFinite), 'draining resumed after every cut').toBe(true);
        },
        SCENARIO_TIMEOUT_MS,
      );
    }

    it(
      'a worker frozen past its lease: its outcome is fenced, its signal aborted on waking, the command ran elsewhere',
      async () => {
        const size = SIZES.freeze;
        run = await Run.open(db, 'freeze');
        const r = run;
        // The first command claimed is long enough to be still running when its frozen worker wakes.
        const [long] = await r.submit(1, 5 * QUICK.leaseMs);
        await r.submit(size.commands, size.workMs);
        const spec = r.spec(QUICK);
        await Promise.all(Array.from({ length: WORKERS }, () => r.spawn(spec)));
        let holder: LogLine | undefined;
        const until = Date.now() + 30_000;
        while (!(holder = r.lines().find((l) => l.event === 'start' && l.id === long))) {
          if (Date.now() > until) throw new Error('the long command never started');
          await sleep(20);
        }
        const frozen = r.workers.find((w) => w.pid === holder.pid)!;
        const frozenAt = Date.now();
        frozen.child.kill('SIGSTOP');
        try {
          await sleep(2 * QUICK.leaseMs);
        } finally {
          frozen.child.kill('SIGCONT');
        }
        const thawedAt = Date.now();
        await r.drained();
        const verdict = await r.verdict();
        const lines = r.lines().filter((l) => l.id === long);
        const mine = lines.filter((l) => l.pid === frozen.pid);
        const elsewhere = lines.filter((l) => l.pid !== frozen.pid);
        const abort = mine.find((l) => l.event === 'abort');
        const rerun = elsewhere.find((l) => l.event === 'start');
        results.push(
          row(
            `a worker frozen for 2 × lease`,
            db,
            verdict,
            `ran elsewhere ${rerun ? ms(rerun.at - frozenAt) : '–'} after the freeze; signal aborted ${abort ? ms(abort.at - thawedAt) : '–'} after waking`,
            `twice: what the frozen worker was finishing when frozen (at-least-once); lease ${QUICK.leaseMs} ms`,
          ),
        );
        expectHeld(verdict, true, 'after the freeze', r.lines());
        expect(
          mine.map((l) => l.event),
          'the frozen worker: aborted on waking, outcome fenced',
        ).toEqual(['start', 'abort', 'fenced']);
        expect(abort!.at).toBeGreaterThanOrEqual(thawedAt);
        expect(
          elsewhere.map((l) => l.event),
          'the command ran once elsewhere',
        ).toEqual(['start', 'end', 'ack']);
        // Only what the frozen worker held can have run twice — unless, on SQLite, it was frozen
        // holding the database's one write lock: then no other worker could write until it woke
        // (the command ran elsewhere only after the thaw), their heartbeats waited longer than the
        // lease, and commands they were running were reclaimed too (at-least-once).
        const writerFrozen = db.name === 'sqlite' && rerun !== undefined && rerun.at >= thawedAt;
        const heldByFrozen = new Set(
          r
            .lines()
            .filter((l) => l.pid === frozen.pid)
            .map((l) => l.id),
        );
        if (!writerFrozen) expect(verdict.twice.filter((id) => !heldByFrozen.has(id))).toEqual([]);
        const record = await r.target.store.get(long!);
        expect(record?.status).toBe('SUCCESS');
      },
      SCENARIO_TIMEOUT_MS,
    );

    it(
      `contention: ${SIZES.contention.processes} processes × ${SIZES.contention.commands} commands, 0 lost, 0 twice`,
      async () => {
        const size = SIZES.contention;
        run = await Run.open(db, 'contend');
        const r = run;
        await r.submit(size.commands, 0);
        const spec = r.spec({ ...QUICK, leaseMs: 10_000, heartbeatIntervalMs: 2_000 }, size.concurrency);
        const workers = await Promise.all(Array.from({ length: size.processes }, () => r.spawn(spec)));
        const tookMs = await r.drained();
        const verdict = await r.verdict();
        const byProcess = workers.map(
          (w) => r.lines().filter((l) => l.pid === w.pid && l.event === 'end').length,
        );
        results.push(
          row(
            `contention: ${size.processes} processes × ${size.commands} commands`,
            db,
            verdict,
            `drained in ${(tookMs / 1000).toFixed(1)} s (${Math.round(size.commands / (tookMs / 1000))}/s)`,
            `${size.concurrency} slots each, empty handler; per process ${Math.min(...byProcess)}–${Math.max(...byProcess)}`,
          ),
        );
        expectHeld(verdict, false, 'under contention', r.lines());
        expect(verdict.interrupted).toBe(0);
      },
      SCENARIO_TIMEOUT_MS,
    );

    if (db.name === 'postgres' || db.name === 'mysql') {
      const kind = db.name;
      const serverFaults: { fault: 'restart' | 'crash'; durable: boolean }[] = [
        { fault: 'restart', durable: false },
        { fault: 'crash', durable: false },
        ...(kind === 'postgres' ? [{ fault: 'crash' as const, durable: true }] : []),
      ];
      for (const { fault, durable } of serverFaults) {
        // Only a PostgreSQL crash with the hot path's synchronous_commit = off can undo acknowledged
        // writes; everything else here commits durably.
        const rerunsPossible = fault === 'crash' && kind === 'postgres' && !durable;
        const setting = kind === 'postgres' ? (durable ? ', durableClaims: true' : ', default store') : '';
        it(
          `a server ${fault} mid-drain on a server of its own${setting}: nothing lost or stuck${rerunsPossible ? '; acknowledged outcomes undone are counted' : ', nothing run twice'}`,
          async () => {
            const size = SIZES.server;
            temp ??= await createTempServer(kind);
            const server = temp;
            await server.start();
            run = await Run.open(db, fault, {
              port: server.port,
              ...(durable ? { store: { durableClaims: true } } : {}),
            });
            const r = run;
            await r.submit(size.commands, size.workMs);
            const spec = r.spec(SERVER_FAULT);
            await Promise.all(Array.from({ length: WORKERS }, () => r.spawn(spec)));
            const faults: { at: number; answered: number }[] = [];
            for (let f = 0; f < size.faults; f++) {
              await sleep(size.everyMs);
              const at = Date.now();
              if (fault === 'crash') await server.crash();
              else await server.stop();
              await server.start();
              faults.push({ at, answered: Date.now() });
            }
            await r.drained();
            const verdict = await r.verdict();
            const lines = r.lines();
            // An outcome acknowledged before a fault whose command started again afterwards: the
            // server lost the acknowledged write.
            const lastAck = new Map<string, number>();
            const undone = new Set<string>();
            for (const l of lines) {
              // (An ack logged just after the crash signal was still a reply sent before it.)
              if (l.event === 'ack' && faults.some((f) => l.at < f.answered)) lastAck.set(l.id, l.at);
              else if (l.event === 'start' && lastAck.has(l.id)) undone.add(l.id);
            }
            const acks = lines.filter((l) => l.event === 'ack');
            const resumed = faults.map(
              (f) => (acks.find((l) => l.at >= f.answered)?.at ?? Infinity) - f.answered,
            );
            const down = faults.map((f) => f.answered - f.at);
            results.push(
              row(
                `server ${fault}${kind === 'postgres' ? (durable ? ' (durableClaims: true)' : ' (default: synchronous_commit off on the hot path)') : ''}`,
                db,
                verdict,
                `down ≤ ${worst(down)}; first success ≤ ${worst(resumed)} after it answered`,
                `acknowledged outcomes undone and re-run: ${undone.size}; ${size.faults} × ${fault} of a temporary server; ${WORKERS} processes × ${SLOTS} slots; lease ${SERVER_FAULT.leaseMs} ms`,
              ),
            );
            expectHeld(verdict, rerunsPossible, `after a server ${fault}`, r.lines());
            if (!rerunsPossible) expect([...undone], 'acknowledged outcomes undone').toEqual([]);
            expect(resumed.every(Number.isFinite), 'draining resumed after the server came back').toBe(true);
          },
          SCENARIO_TIMEOUT_MS,
        );
      }
    }

    if (db.name === 'postgres') describeFailover(db, results);
  });
}

/**
 * PostgreSQL failover: a primary and its streaming standby of their own, the workers and the
 * test reaching them through a loopback proxy (the HAProxy or virtual IP of a deployment). Mid-drain
 * the primary is SIGKILLed, the standby promoted and the proxy switched to it.
 */
function describeFailover(db: FaultDatabase, results: ResultRow[]): void {
  const variants = [
    { synchronous: false, durable: false },
    ...(FULL ? [{ synchronous: false, durable: true }] : []),
    { synchronous: true, durable: true },
  ];
  for (const { synchronous, durable } of variants) {
    const setting = `${synchronous ? 'synchronous' : 'asynchronous'} standby, ${durable ? 'durableClaims: true' : 'default store'}`;
    it(
      `failover to a promoted standby mid-drain (${setting}): nothing the new primary holds is lost or stuck, re-runs only of what it had not received${synchronous ? ' (none)' : ''}, no restart`,
      async () => {
        const size = SIZES.failover;
        const pair = await ReplicatedPostgres.start({ synchronous });
        let snapshotStore: ReturnType<typeof createPostgresStore> | null = null;
        let run: Run | null = null;
        let proxy: LoopbackProxy | null = null;
        try {
          const through = new LoopbackProxy({ host: '127.0.0.1', port: pair.primary.port });
          proxy = through;
          await through.start();
          const r = await Run.open(db, 'failover', {
            port: through.port,
            ...(durable ? { store: { durableClaims: true } } : {}),
          });
          // Not r.proxy: the run's namespace is dropped through it at close, before it stops.
          run = r;
          await r.submit(size.commands, size.workMs);
          // Submits commit durably; with an asynchronous standby they may still be on their way.
          await pair.caughtUp();
          const workers = await Promise.all(
            Array.from({ length: WORKERS }, () => r.spawn(r.spec(FAILOVER, SLOTS, through.port))),
          );
          await sleep(size.afterMs);
          const crashAt = Date.now();
          const { promotedMs, crashed } = await pair.failover();
          // The new primary as promoted, before any worker reaches it.
          snapshotStore = createPostgresStore(
            r.target.workerStore(pair.standby.port).options as PostgresStoreOptions,
          );
          const promoted: CommandRecord[] = [];
          for (let i = 0; i < r.committed.length; i += 1_000) {
            promoted.push(...(await snapshotStore.getMany(r.committed.slice(i, i + 1_000))));
          }
          const switchedAt = Date.now();
          through.switchTo({ host: '127.0.0.1', port: pair.standby.port });
          await crashed;
          await r.drained();
          const restarted = workers.filter((w) => w.child.exitCode !== null || w.child.signalCode !== null);
          const cost = failoverCost(r.committed, r.lines(), promoted, switchedAt);
          const lost = new Set(cost.lostByReplication);
          const verdict = await r.verdict();
          // asynccmd's own count: the commands the new primary holds.
          const own = {
            ...verdict,
            lost: verdict.lost.filter((id) => !lost.has(id)),
            stuck: verdict.stuck.filter((id) => !lost.has(id)),
          };
          const acks = r.lines().filter((l) => l.event === 'ack' && l.at >= switchedAt);
          const resumedMs = (acks[0]?.at ?? Infinity) - switchedAt;
          const outside = verdict.twice.filter((id) => !cost.unreplicated.has(id));
          results.push(
            row(
              `failover: primary SIGKILLed, standby promoted (${setting})`,
              db,
              own,
              `promoted ${ms(promotedMs)} and proxy switched ${ms(switchedAt - crashAt)} after the crash; first success ${ms(resumedMs)} after the switch`,
              `lost by replication (committed, not on the new primary): ${cost.lostByReplication.length}; acknowledged writes the standby had not received: ${cost.unreplicated.size}; re-run after the switch: ${cost.reruns.length}; ${WORKERS} processes × ${SLOTS} slots through a proxy switched to the standby; no restart; lease ${FAILOVER.leaseMs} ms`,
            ),
          );
          expectHeld(own, true, `after the failover (${setting})`, r.lines());
          expect(
            cost.reruns.filter((id) => !cost.unreplicated.has(id)),
            'a re-run of a command whose acknowledged writes the new primary held',
          ).toEqual([]);
          expect(outside, 'executed twice though the new primary held its writes').toEqual([]);
          expect(Number.isFinite(resumedMs), 'the same worker processes drained on after the switch').toBe(
            true,
          );
          expect(
            restarted.map((w) => w.stderr()),
            'worker processes that ended during the drain',
          ).toEqual([]);
          if (synchronous) {
            expect(cost.lostByReplication, 'lost by replication with a synchronous standby').toEqual([]);
            expect([...cost.unreplicated], 'unreplicated with a synchronous standby').toEqual([]);
            expect(verdict.twice, 'executed twice with a synchronous standby').toEqual([]);
          }
        } finally {
          await snapshotStore?.close();
          await run?.close();
          await proxy?.stop();
          await pair.dispose();
        }
      },
      SCENARIO_TIMEOUT_MS,
    );
  }
}
