/** Pure checks on what a bench run observed: exactly-once counts and latency samples. */

/** The verdict of an exactly-once check, as the database counted it. */
export interface ExactlyOnceCounts {
  /** Commands the system reports finished successfully (or, for graphile, jobs gone). */
  readonly finished: number;
  readonly once: number;
  readonly twiceOrMore: number;
  readonly never: number;
  /** Executions of sequence numbers that were never enqueued. */
  readonly strays: number;
}

export function exactlyOnceVerdict(total: number, c: ExactlyOnceCounts): string {
  const ok =
    c.finished === total && c.once === total && c.twiceOrMore === 0 && c.never === 0 && c.strays === 0;
  const text = `exactly once ${c.once}/${total}, finished ${c.finished}, dup ${c.twiceOrMore}, missing ${c.never}, stray ${c.strays}`;
  if (!ok) throw new Error(`exactly-once check FAILED: ${text}`);
  return `exactly once ${c.once}/${total} ✓`;
}

export interface LatencyResult {
  /** Start in the executor minus commit in the submitter, ms, warm-up samples dropped. */
  readonly samples: number[];
  readonly check: string;
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
