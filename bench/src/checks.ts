/** Pure checks on what a bench run observed: exactly-once counts and latency samples. */

/**
 * What the database holds after a drain, joined with the executions the consumers recorded: each
 * command row by its status, and whether (and how often) it ran.
 */
export interface ExactlyOnceCounts {
  /** Command rows of the bench type (for graphile-worker: the jobs enqueued). */
  readonly commands: number;
  /** SUCCESS (for graphile-worker: gone from its table) and ran exactly once: the good outcome. */
  readonly succeededOnce: number;
  /** Ran more than once: a double execution. */
  readonly ranTwice: number;
  /** SUCCESS although no executor ran it. */
  readonly succeededNotRun: number;
  /** Ran once but is not SUCCESS (its completion was lost). */
  readonly ranNotSucceeded: number;
  /** Still PENDING (or WAITING) and never ran: only allowed in a drain stopped at its time cap. */
  readonly pendingNotRun: number;
  /** Executions of sequence numbers that were never enqueued. */
  readonly strays: number;
  /** Never ran and left in any other state (RUNNING, DEAD, …). */
  readonly other: number;
}

/**
 * The exactly-once verdict. A complete drain needs every command SUCCESS after exactly one run; a
 * drain stopped at its time cap needs every command that ran to be SUCCESS after exactly one run,
 * and every other one back to PENDING (or still WAITING for its dependencies). Anything else throws.
 */
export function exactlyOnceVerdict(total: number, c: ExactlyOnceCounts, complete = true): string {
  const clean =
    c.commands === total &&
    c.ranTwice === 0 &&
    c.succeededNotRun === 0 &&
    c.ranNotSucceeded === 0 &&
    c.strays === 0 &&
    c.other === 0 &&
    c.succeededOnce + c.pendingNotRun === total &&
    (!complete || c.succeededOnce === total);
  if (!clean) {
    const text = Object.entries(c)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    throw new Error(`exactly-once check FAILED (${total} enqueued): ${text}`);
  }
  return complete
    ? `exactly once ${c.succeededOnce}/${total} ✓`
    : `capped: ${c.succeededOnce}/${total} ran, each exactly once, the rest PENDING or WAITING ✓`;
}

export interface LatencyResult {
  /** Start in the executor minus commit in the submitter, ms, warm-up samples dropped. */
  readonly samples: number[];
  readonly check: string;
  /** The consumer process's CPU per command over the run (idle polling included), µs. */
  readonly cpuUsPerCommand?: number;
  /** The consumer process's peak RSS, MiB. */
  readonly peakRssMb?: number;
  /** The database server's CPU over the run per command, µs (submitter's inserts included). */
  readonly dbCpuUsPerCommand?: number;
  /** Notes for the JSON, e.g. each round's p50 and p99 when the samples are pooled rounds. */
  readonly diagnostics?: string[];
}

/** Joins commit and start times by sequence number; a command started twice fails the run. */
export function joinSamples(
  commitSeqs: readonly number[],
  commitTimes: readonly number[],
  startSeqs: readonly number[],
  startTimes: readonly number[],
  warmup: number,
): LatencyResult {
  const started = new Map<number, number>();
  startSeqs.forEach((seq, i) => {
    if (started.has(seq)) throw new Error(`command ${seq} started twice`);
    started.set(seq, startTimes[i] as number);
  });
  const samples: number[] = [];
  commitSeqs.forEach((seq, i) => {
    const start = started.get(seq);
    if (start === undefined) throw new Error(`command ${seq} committed but never started`);
    if (seq > warmup) samples.push(start - (commitTimes[i] as number));
  });
  if (started.size !== commitSeqs.length)
    throw new Error(`${started.size - commitSeqs.length} unknown commands started`);
  return { samples, check: `${commitSeqs.length} committed, each started once` };
}

/**
 * The exactly-once counts computed in memory, for a database the bench reads whole (SQLite): each
 * enqueued command's (seq, status) against the sequence numbers the consumers ran.
 */
export function countExecutions(
  commands: readonly { readonly seq: number; readonly status: string }[],
  executedSeqs: readonly number[],
): ExactlyOnceCounts {
  const runs = new Map<number, number>();
  for (const seq of executedSeqs) runs.set(seq, (runs.get(seq) ?? 0) + 1);
  const enqueued = new Set<number>();
  const c = {
    commands: commands.length,
    succeededOnce: 0,
    ranTwice: 0,
    succeededNotRun: 0,
    ranNotSucceeded: 0,
    pendingNotRun: 0,
    strays: 0,
    other: 0,
  };
  for (const { seq, status } of commands) {
    enqueued.add(seq);
    const n = runs.get(seq) ?? 0;
    if (n === 1 && status === 'SUCCESS') c.succeededOnce++;
    else if (n === 1) c.ranNotSucceeded++;
    else if (n === 0 && status === 'SUCCESS') c.succeededNotRun++;
    else if (n === 0 && (status === 'PENDING' || status === 'WAITING')) c.pendingNotRun++;
    else if (n === 0) c.other++;
  }
  for (const [seq, n] of runs) {
    if (n > 1) c.ranTwice++;
    if (!enqueued.has(seq)) c.strays++;
  }
  return c;
}

/** What the effect table holds after an effect drain, against each command's status. */
export interface EffectCounts {
  /** Rows in the effect table. */
  readonly rows: number;
  /** SUCCESS commands (for graphile-worker: gone from its table) with exactly one row. */
  readonly succeededWithOne: number;
  /** Commands with more than one row: an effect applied twice. */
  readonly doubled: number;
  /** SUCCESS commands without a row: an effect lost. */
  readonly succeededWithout: number;
  /** Rows of a command that is not SUCCESS (or of no command): an effect of an attempt that did not succeed. */
  readonly withoutSuccess: number;
}

/** The effect counts computed in memory: each command's (seq, status) against the table's seqs. */
export function countEffects(
  commands: readonly { readonly seq: number; readonly status: string }[],
  effectSeqs: readonly number[],
): EffectCounts {
  const rowsOf = new Map<number, number>();
  for (const seq of effectSeqs) rowsOf.set(seq, (rowsOf.get(seq) ?? 0) + 1);
  const succeeded = new Set<number>();
  let succeededWithOne = 0;
  let succeededWithout = 0;
  for (const { seq, status } of commands) {
    if (status !== 'SUCCESS') continue;
    succeeded.add(seq);
    const n = rowsOf.get(seq) ?? 0;
    if (n === 1) succeededWithOne++;
    else if (n === 0) succeededWithout++;
  }
  let doubled = 0;
  let withoutSuccess = 0;
  for (const [seq, n] of rowsOf) {
    if (n > 1) doubled++;
    if (!succeeded.has(seq)) withoutSuccess += n;
  }
  return { rows: effectSeqs.length, succeededWithOne, doubled, succeededWithout, withoutSuccess };
}

/**
 * The effect verdict of a drain of `total` commands. `exact` (a transactional executor): every
 * SUCCESS command has exactly one row and there is no other row — `total` rows after a complete
 * drain —, or it throws. Otherwise the counts are reported, for information.
 */
export function effectVerdict(total: number, c: EffectCounts, exact: boolean, complete = true): string {
  const clean =
    c.doubled === 0 &&
    c.succeededWithout === 0 &&
    c.withoutSuccess === 0 &&
    c.rows === c.succeededWithOne &&
    (!complete || c.rows === total);
  const counts = `effect rows ${c.rows}/${total}`;
  if (clean) return `${counts}, one per ${complete ? 'command' : 'SUCCESS'}${exact ? ' ✓' : ''}`;
  const text = Object.entries(c)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  if (exact) throw new Error(`effect check FAILED (${total} enqueued): ${text}`);
  return `${counts} (${text})`;
}
