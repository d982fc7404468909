import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandId, CommandRecord } from '@asynccmd/core';
import { AsyncCommands } from '@asynccmd/runtime';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { FaultDatabase } from './databases.js';
import type { LogLine, Verdict } from './execution-log.js';
import { printTable, saveResults, type ResultRow } from './results.js';
import {
  cuts,
  DEFAULTS,
  effectTable,
  evidence,
  expectHeld,
  FULL,
  PATIENT,
  QUICK,
  row,
  Run,
  SCENARIO_TIMEOUT_MS,
  throughProxy,
  tuned,
  TYPE,
  underLoad,
  type Setting,
} from './suite.js';
import { killWorker, type WorkerProcess, type WorkerSpec } from './workers.js';

/**
 * A diamond-shaped workflow: a root, `layers` layers of `width` parallel steps (the first each
 * waiting for the root, every later one for two steps of the layer before it), a fan-in step
 * waiting for the whole last layer, and a batch callback waiting for every step.
 */
const SIZE = FULL
  ? {
      width: 100,
      layers: 10,
      workMs: 100,
      kills: 5,
      killEveryMs: 1_000,
      cuts: 3,
      cutMs: 3_000,
      cutEveryMs: 1_000,
    }
  : { width: 20, layers: 5, workMs: 300, kills: 3, killEveryMs: 400, cuts: 2, cutMs: 1_500, cutEveryMs: 500 };

/** When a fault was injected; for a kill, the process killed. */
interface Fault {
  readonly at: number;
  readonly killed?: number;
}

/** Four worker processes drain it. */
const WORKERS = 4;
const CALLBACK = `${TYPE}.callback`;

interface Diamond {
  /** Every step's command id, the callback's included. */
  readonly ids: readonly CommandId[];
  readonly callback: CommandId;
  /** Each edge: the dependant and the command it waits for. */
  readonly edges: readonly { readonly dependant: CommandId; readonly dependency: CommandId }[];
}

/** Submits the diamond through the client's workflow builder, in one transaction. */
async function submitDiamond(r: Run): Promise<Diamond> {
  type Types = { [TYPE]: { ms: number }; [CALLBACK]: Record<string, never> };
  const commands = new AsyncCommands<Types, unknown>({
    store: r.target.store,
    executors: [],
    submitOnlyTypes: [TYPE, CALLBACK],
  });
  const workflow = commands.client.workflow(`diamond-${r.namespace}`);
  const named: { readonly dependant: string; readonly dependency: string }[] = [];
  const step = (name: string, dependsOn: readonly string[]): string => {
    workflow.step(name, TYPE, { ms: SIZE.workMs }, { maxRetry: 5, dependsOn });
    for (const dependency of dependsOn) named.push({ dependant: name, dependency });
    return name;
  };
  const steps = [step('root', [])];
  let previous = steps.slice();
  for (let layer = 1; layer <= SIZE.layers; layer++) {
    const before = previous;
    previous = Array.from({ length: SIZE.width }, (_, i) =>
      step(`layer${layer}.${i}`, layer === 1 ? ['root'] : [before[i]!, before[(i + 1) % SIZE.width]!]),
    );
    steps.push(...previous);
  }
  steps.push(step('fan-in', previous));
  workflow.step(
    'callback',
    CALLBACK,
    {},
    { maxRetry: 5, dependsOn: steps.map((s) => ({ step: s, onFailure: 'continue' as const })) },
  );
  for (const dependency of steps) named.push({ dependant: 'callback', dependency });
  const submitted = await workflow.submit();
  const id = (name: string): CommandId => submitted.steps[name]!;
  r.committed.push(...Object.values(submitted.steps));
  return {
    ids: Object.values(submitted.steps),
    callback: id('callback'),
    edges: named.map((e) => ({ dependant: id(e.dependant), dependency: id(e.dependency) })),
  };
}

/**
 * Starts of a dependant that came before its dependency's SUCCESS committed. The execution that
 * committed it names itself in the command's result; its `end` line is written before its
 * completion is sent, so every start of a dependant claimed after that commit comes later in the
 * log (one file, appended whole by every process). A start before that line was claimed while the
 * dependency was not yet SUCCESS — even if an earlier execution of the dependency had ended.
 */
function startsBeforeDependencies(
  diamond: Diamond,
  lines: readonly LogLine[],
  rows: readonly CommandRecord[],
): string[] {
  const committedRun = new Map(rows.map((c) => [c.id, (c.result as { run?: string } | null)?.run]));
  const ends = new Map<string, number>();
  const starts = new Map<CommandId, number[]>();
  lines.forEach((l, at) => {
    if (l.event === 'end') ends.set(`${l.id} ${l.detail}`, at);
    else if (l.event === 'start') starts.set(l.id, [...(starts.get(l.id) ?? []), at]);
  });
  const found: string[] = [];
  for (const { dependant, dependency } of diamond.edges) {
    const run = committedRun.get(dependency);
    const committedAt = run === undefined ? undefined : ends.get(`${dependency} ${run}`);
    for (const at of starts.get(dependant) ?? []) {
      if (committedAt === undefined || at < committedAt)
        found.push(
          `${dependant} started (log line ${at}) before ${dependency}'s run ${run} ended (${committedAt})`,
        );
    }
  }
  return found;
}

/** What the callback left and how many effect rows it wrote (exactly one: it ran once). */
async function callbackOutcome(db: FaultDatabase, r: Run, diamond: Diamond) {
  const effects = await effectTable(db, r.namespace).counts(r.target.store);
  const [record] = await r.target.store.getMany([diamond.callback]);
  return {
    effectRows: effects.get(diamond.callback) ?? 0,
    otherEffectRows: [...effects.keys()].filter((id) => id !== diamond.callback).length,
    status: record?.status,
    counts: record?.result as { succeeded?: number; dead?: number; cancelled?: number } | null,
  };
}

/**
 * The workflow fault scenarios: the diamond drained by four worker processes under a SIGKILL loop
 * and, on a server, under cuts of every connection; every worker option at its default with the
 * cores kept busy first, then tuned. Checked from the execution log outside the tables: every step
 * ran and ended SUCCESS, none started before its dependencies' SUCCESS committed, the callback
 * ran exactly once (its one effect row, written in its transaction), nothing lost or stuck.
 */
export function describeWorkflowFaults(db: FaultDatabase): void {
  describe(`workflow faults on ${db.name}`, () => {
    const results: ResultRow[] = [];
    let run: Run | null = null;
    afterEach(async () => {
      await run?.close();
      run = null;
    });
    afterAll(() => {
      printTable(`workflow fault suite on ${db.name} (${FULL ? 'full' : 'reduced'} sizes)`, results);
      saveResults(`workflow-${db.name}`, results);
    });
    const steps = 2 + SIZE.width * SIZE.layers;
    const shape = `${steps} steps (root → ${SIZE.layers} layers of ${SIZE.width} → fan-in) and a batch callback, ${SIZE.workMs} ms each, ${WORKERS} processes`;

    /** Opens a run, submits the diamond, starts the workers, injects `faults`, checks and records. */
    async function scenario(
      name: string,
      s: Setting,
      open: () => Promise<{ r: Run; port?: number }>,
      faults: (r: Run, spec: WorkerSpec, alive: WorkerProcess[]) => Promise<Fault[]>,
      twiceAllowed: boolean,
    ): Promise<void> {
      const { r, port } = await open();
      run = r;
      const effects = effectTable(db, r.namespace);
      await effects.create(r.target.store);
      const diamond = await submitDiamond(r);
      const spec: WorkerSpec = {
        ...r.spec(s.timing, s.concurrency, port),
        workflow: true,
        effects: { dialect: db.name, table: effects.table },
      };
      await underLoad(s, async (load) => {
        const began = Date.now();
        const alive = await Promise.all(Array.from({ length: WORKERS }, () => r.spawn(spec)));
        const injected = await faults(r, spec, alive);
        const faultsAt = injected.map((f) => f.at);
        await r.drained();
        const tookMs = Date.now() - began;
        const verdict: Verdict = await r.verdict();
        const lines = r.lines();
        const rows = await r.target.store.getMany([...diamond.ids]);
        const early = startsBeforeDependencies(diamond, lines, rows);
        const seenEarly = lines.filter((l) => l.event === 'early');
        const callback = await callbackOutcome(db, r, diamond);
        const firstStarts = new Map<string, number>();
        for (const l of lines) if (l.event === 'start' && !firstStarts.has(l.id)) firstStarts.set(l.id, l.at);
        // A fault landed mid-drain when some step had not started yet.
        const midDrain = faultsAt.filter((at) => [...firstStarts.values()].some((t) => t > at)).length;
        results.push(
          row(
            `workflow: ${name} (${s.name})`,
            db,
            verdict,
            `drained in ${(tookMs / 1000).toFixed(1)} s; starts before a dependency's SUCCESS: ${early.length + seenEarly.length}; callback effect rows: ${callback.effectRows}`,
            `${shape}, ${load}; faults mid-drain: ${midDrain} of ${faultsAt.length}; store errors taken for outages: ${lines.filter((l) => l.event === 'store-error').length}; callback saw ${JSON.stringify(callback.counts)}`,
          ),
        );
        expectHeld(verdict, twiceAllowed, `in the workflow (${name})`, lines);
        // A step runs twice only when a killed worker had ended it without recording its SUCCESS,
        // or when the claim of a run was taken away (its outcome fenced: the lease had lapsed, as
        // a heartbeat can miss a 1 s lease on the loaded machine): at-least-once, named.
        const unrecorded = new Set(lines.filter((l) => l.event === 'fenced').map((l) => l.id));
        for (const { killed } of injected) {
          const ended = new Set<string>();
          for (const l of lines) {
            if (l.pid !== killed) continue;
            if (l.event === 'end') ended.add(l.id);
            else if (l.event === 'ack') ended.delete(l.id);
          }
          for (const id of ended) unrecorded.add(id);
        }
        expect(
          verdict.twice.filter((id) => !unrecorded.has(id)),
          `steps run twice with no kill or lost lease to explain it\n${evidence(verdict.twice, lines)}`,
        ).toEqual([]);
        expect(early, 'a step started before its dependencies had succeeded').toEqual([]);
        expect(
          seenEarly.map((l) => `${l.id} saw ${l.detail}`),
          'a step found a dependency unfinished as it started',
        ).toEqual([]);
        expect(rows.filter((c) => c.status !== 'SUCCESS').map((c) => c.id)).toEqual([]);
        expect(
          { effectRows: callback.effectRows, others: callback.otherEffectRows, status: callback.status },
          'the callback ran exactly once',
        ).toEqual({ effectRows: 1, others: 0, status: 'SUCCESS' });
        expect(callback.counts).toMatchObject({ succeeded: steps, dead: 0, cancelled: 0 });
        expect(midDrain, 'faults that landed while steps were still to start').toBeGreaterThan(0);
      });
    }

    for (const s of [DEFAULTS, tuned(QUICK)]) {
      it(
        `a ${steps}-step diamond workflow under a SIGKILL loop (${s.name}): every step SUCCESS, none before its dependencies, the callback once`,
        async () => {
          await scenario(
            `${SIZE.kills} × SIGKILL of a worker`,
            s,
            async () => ({ r: await Run.open(db, 'wfkill') }),
            async (r, spec, alive) => {
              // A replacement starts at once, but a worker process takes a second or two to start
              // on the loaded machine: the next kill does not wait for it, so the kills stay
              // `killEveryMs` apart and land mid-drain.
              const at: Fault[] = [];
              const starting: Promise<void>[] = [];
              for (let k = 0; k < SIZE.kills; k++) {
                await sleep(SIZE.killEveryMs);
                const victim = alive.splice(k % alive.length, 1)[0]!;
                at.push({ at: Date.now(), killed: victim.pid });
                await killWorker(victim);
                starting.push(r.spawn(spec).then((w) => void alive.push(w)));
              }
              await Promise.all(starting);
              return at;
            },
            // A kill between a step's end and its recorded SUCCESS runs it again: at-least-once.
            true,
          );
        },
        SCENARIO_TIMEOUT_MS,
      );
    }

    const server = db.server;
    if (server) {
      for (const s of [DEFAULTS, tuned(PATIENT)]) {
        it(
          `a ${steps}-step diamond workflow under cuts of every connection (${s.name}): every step SUCCESS once, none before its dependencies, the callback once`,
          async () => {
            await scenario(
              `${SIZE.cuts} × all connections cut for ${SIZE.cutMs / 1000} s`,
              s,
              async () => {
                const { r, proxy } = await throughProxy(db, 'wfcut', server);
                return { r, port: proxy.port };
              },
              async (r) => {
                const size = { cuts: SIZE.cuts, cutMs: SIZE.cutMs, everyMs: SIZE.cutEveryMs };
                const restored = await cuts(r.proxy!, size);
                return restored.map((end) => ({ at: end - SIZE.cutMs }));
              },
              false,
            );
          },
          SCENARIO_TIMEOUT_MS,
        );
      }
    }
  });
}
