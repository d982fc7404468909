import { readFileSync } from 'node:fs';
import type { CommandRecord, CommandStatus } from '@asynccmd/core';

export type LogEvent = 'start' | 'end' | 'ack' | 'fenced' | 'abort' | 'store-error' | 'early';

/** One line of a worker's execution log (see worker.mjs). */
export interface LogLine {
  readonly event: LogEvent;
  readonly id: string;
  readonly pid: number;
  readonly at: number;
  /** A workflow's lines: the execution's name (start, end, abort) or what was not done (early). */
  readonly detail?: string;
}

export function readExecutionLog(path: string): LogLine[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  const lines: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (raw === '') continue;
    const [event, id, pid, at, detail] = raw.split(' ');
    lines.push({
      event: event as LogEvent,
      id: id!,
      pid: Number(pid),
      at: Number(at),
      ...(detail === undefined ? {} : { detail }),
    });
  }
  return lines;
}

/** Reads a growing log incrementally: the ids whose success has been recorded so far. */
export class AckCounter {
  readonly #acked = new Set<string>();
  #offset = 0;
  constructor(private readonly path: string) {}

  count(): number {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch {
      return 0;
    }
    const end = text.lastIndexOf('\n') + 1; // a line still being written waits for the next read
    for (const raw of text.slice(this.#offset, end).split('\n')) {
      if (raw.startsWith('ack ')) this.#acked.add(raw.split(' ')[1]!);
    }
    this.#offset = end;
    return this.#acked.size;
  }
}

/** What the checker found for one run of a scenario. */
export interface Verdict {
  readonly committed: number;
  /** Committed, but never a finished execution or not SUCCESS at the end. */
  readonly lost: string[];
  /** Executions that ran to their end more than once. */
  readonly twice: string[];
  /** Not in a terminal state at the end. */
  readonly stuck: string[];
  /** Executions begun but never finished (the process was killed, or the executor aborted). */
  readonly interrupted: number;
  /** Outcomes refused because the claim had been taken away. */
  readonly fenced: number;
  /** The rows of the lost and stuck commands as they were at the end, for a failure message. */
  readonly rowsOf: ReadonlyMap<string, CommandRecord>;
}

const TERMINAL: readonly CommandStatus[] = ['SUCCESS', 'DEAD', 'CANCELLED'];

/** Compares what was committed, what the log says ran, and what the table says at the end. */
export function check(
  committed: readonly string[],
  log: readonly LogLine[],
  rows: readonly CommandRecord[],
): Verdict {
  const finished = new Map<string, number>();
  const started = new Map<string, number>();
  let fenced = 0;
  for (const line of log) {
    if (line.event === 'end') finished.set(line.id, (finished.get(line.id) ?? 0) + 1);
    else if (line.event === 'start') started.set(line.id, (started.get(line.id) ?? 0) + 1);
    else if (line.event === 'fenced') fenced++;
  }
  const status = new Map(rows.map((r) => [String(r.id), r.status]));
  const lost: string[] = [];
  const twice: string[] = [];
  const stuck: string[] = [];
  let interrupted = 0;
  for (const id of committed) {
    const s = status.get(id);
    const runs = finished.get(id) ?? 0;
    interrupted += (started.get(id) ?? 0) - runs;
    if (s !== undefined && !TERMINAL.includes(s)) stuck.push(id);
    else if (s !== 'SUCCESS' || runs === 0) lost.push(id);
    if (runs > 1) twice.push(id);
  }
  const rowsOf = new Map(
    rows
      .filter((r) => lost.includes(String(r.id)) || stuck.includes(String(r.id)))
      .map((r) => [String(r.id), r]),
  );
  return { committed: committed.length, lost, twice, stuck, interrupted, fenced, rowsOf };
}
