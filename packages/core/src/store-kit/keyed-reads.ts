import type { CommandId } from '../command.js';
import { KEY_DUE_COUNTED, type KeysWaiting } from '../ports/key-limits.js';
import { compareIds } from './rows.js';

/*
 * What a keyed claim reads (key limits, fair share, rate limits per key): a bounded number of rows
 * per key, however long one key's backlog is. Each command of a keyed type carries its key in a
 * column the database derives from the payload when the command is written, and an index holds the
 * PENDING ones by (type, key, priority, due time, id). A claim reads the first entry of each
 * (key, priority) there — one entry per pair, a loose index scan — and then, of the keys whose
 * first due command can be among the claim's, only as many due commands as can be taken.
 */

/** The key of a keyed type's command that has none (no field, JSON null, or ''): not limited; one key for turns. */
export const NO_KEY = '';

/** The first PENDING command of one (key, priority) of a keyed type, in claim order (due or not). */
export interface KeyPriorityHead {
  readonly key: string;
  readonly priority: number;
  readonly nextRunAtMs: number;
  readonly id: CommandId;
}

/** A (key, priority) a keyed claim reads: at most `rows` of its due, claimable commands, in claim order. */
export interface KeyedRead {
  readonly key: string;
  readonly priority: number;
  readonly rows: number;
}

/** A due, claimable command a keyed claim read. */
export interface KeyedCandidate {
  readonly id: CommandId;
  readonly key: string;
  readonly priority: number;
  readonly nextRunAtMs: number;
}

/** The statements a keyed claim reads with, inside its transaction. */
export interface KeyedClaimReader {
  /**
   * The first PENDING command of each (key, priority) of the type (one index entry each) and, when
   * `countRunning`, the type's RUNNING commands per key (NO_KEY left out; else an empty map).
   */
  readonly heads: (countRunning: boolean) => Promise<{
    readonly heads: readonly KeyPriorityHead[];
    readonly running: ReadonlyMap<string, number>;
  }>;
  /** For each read, the first `rows` due, claimable commands of its (key, priority), in claim order. */
  readonly rows: (reads: readonly KeyedRead[]) => Promise<readonly KeyedCandidate[]>;
}

type Ordered = Pick<KeyedCandidate, 'priority' | 'nextRunAtMs' | 'id'>;
const byClaimOrder = (a: Ordered, b: Ordered): number =>
  a.priority - b.priority || a.nextRunAtMs - b.nextRunAtMs || compareIds(a.id, b.id);

/** How many of a key's commands already count against it: NO_KEY's never do. */
const runningOf = (running: ReadonlyMap<string, number>, key: string): number =>
  key === NO_KEY ? 0 : (running.get(key) ?? 0);

/** The turns a key's commands may take (its places left): NO_KEY's are not limited. */
const placesOf = (running: ReadonlyMap<string, number>, key: string, cap: number, limit: number): number =>
  key === NO_KEY ? limit : cap - runningOf(running, key);

/**
 * The weights of a weighted fair share: how many commands a key takes per turn (a key without one,
 * and NO_KEY, takes one).
 */
export type KeyWeights = ReadonlyMap<string, number>;

const NO_WEIGHTS: KeyWeights = new Map();

const weightOf = (weights: KeyWeights, key: string): number => (key === NO_KEY ? 1 : (weights.get(key) ?? 1));

/**
 * The turn of a key's command that has `before` of the key's commands ahead of it (its RUNNING
 * ones and its rank): a key of weight w takes w commands per turn.
 */
const turnOf = (before: number, weight: number): number => Math.floor(before / weight) + 1;

/**
 * Which (key, priority) a claim of `limit` reads, and how many rows of each. A command's turn is its
 * rank among its key's due commands (claim order) plus the key's RUNNING, divided by the key's
 * weight (`weights`, default 1: a key of weight w takes w commands per turn); the claim takes by
 * priority, then turn, then due time and id, at most `cap` commands per key (NO_KEY: any). The keys
 * are ranked by their first due command (their head: its priority, turn, due time and id): a key
 * whose head ranks r-th has r − 1 heads before each of its commands, so at most limit − r + 1 of
 * them can be taken, and a key ranked past `limit` none. So at most limit·(limit + 1)/2 rows per
 * priority are read, whatever the backlog.
 * A head is the index's first entry, claimable or not (a requeued command still held, one behind
 * its ordering key): then a key may be read for fewer rows than it could give, never more taken.
 */
export function keyedReads(
  heads: readonly KeyPriorityHead[],
  running: ReadonlyMap<string, number>,
  cap: number,
  limit: number,
  nowMs: number,
  weights: KeyWeights = NO_WEIGHTS,
): KeyedRead[] {
  const duePairs = new Map<string, KeyPriorityHead[]>();
  for (const head of heads) {
    if (head.nextRunAtMs > nowMs) continue;
    const pairs = duePairs.get(head.key);
    if (pairs === undefined) duePairs.set(head.key, [head]);
    else pairs.push(head);
  }
  const keys = [...duePairs.entries()]
    .map(([key, pairs]) => ({ key, pairs, first: [...pairs].sort(byClaimOrder)[0]! }))
    .filter((k) => placesOf(running, k.key, cap, limit) > 0)
    .sort(
      (a, b) =>
        a.first.priority - b.first.priority ||
        turnOf(runningOf(running, a.key), weightOf(weights, a.key)) -
          turnOf(runningOf(running, b.key), weightOf(weights, b.key)) ||
        byClaimOrder(a.first, b.first),
    )
    .slice(0, limit);
  return keys.flatMap((k, i) => {
    const rows = Math.min(limit - i, placesOf(running, k.key, cap, limit));
    return k.pairs.map((p) => ({ key: k.key, priority: p.priority, rows }));
  });
}

/**
 * A candidate with its turn: its rank among its key's candidates in claim order plus the key's
 * RUNNING, by the key's weight (turnOf).
 */
interface Turned {
  readonly c: KeyedCandidate;
  readonly turn: number;
}

/** `candidates` with their turns, none past a key's places, in the order a claim takes them. */
function inTurns(
  candidates: readonly KeyedCandidate[],
  running: ReadonlyMap<string, number>,
  cap: number,
  limit: number,
  weights: KeyWeights,
): Turned[] {
  const byKey = new Map<string, KeyedCandidate[]>();
  for (const c of candidates) {
    const of = byKey.get(c.key);
    if (of === undefined) byKey.set(c.key, [c]);
    else of.push(c);
  }
  const turns: Turned[] = [];
  for (const [key, of] of byKey) {
    const base = runningOf(running, key);
    const places = placesOf(running, key, cap, limit);
    const weight = weightOf(weights, key);
    of.sort(byClaimOrder).forEach((c, rank) => {
      if (rank < places) turns.push({ c, turn: turnOf(base + rank, weight) });
    });
  }
  return turns.sort((a, b) => a.c.priority - b.c.priority || a.turn - b.turn || byClaimOrder(a.c, b.c));
}

/**
 * Of `candidates` (each key's read in full up to what keyedReads asked), the at most `limit` a claim
 * takes, in the order it takes them: by priority, then turn (rank within the key plus its RUNNING,
 * by its weight), then due time and id, none past a key's `cap` commands (NO_KEY's: any).
 */
export function inTurnsWithin(
  candidates: readonly KeyedCandidate[],
  running: ReadonlyMap<string, number>,
  cap: number,
  limit: number,
  weights: KeyWeights = NO_WEIGHTS,
): KeyedCandidate[] {
  return inTurns(candidates, running, cap, limit, weights)
    .slice(0, limit)
    .map((t) => t.c);
}

const pairOf = (r: { readonly key: string; readonly priority: number }): string =>
  `${r.priority}\u0000${r.key}`;

/**
 * A claim's first reads: keyedReads' `reads`, each key cut down to the turn up to which the keys
 * read would fill `limit` if each had as many due commands as asked (the level). Keys with long
 * backlogs — the usual case of fair share — are then read for about `limit` rows in all instead of
 * up to limit·(limit + 1)/2; settledTake finds out when a key had fewer and the level was too low.
 */
function leveledReads(
  reads: readonly KeyedRead[],
  baseOf: (key: string) => number,
  weightOfKey: (key: string) => number,
  limit: number,
): KeyedRead[] {
  const keys = new Map<string, { base: number; rows: number; weight: number }>();
  for (const r of reads) {
    const k = keys.get(r.key);
    if (k === undefined) keys.set(r.key, { base: baseOf(r.key), rows: r.rows, weight: weightOfKey(r.key) });
    else if (r.rows > k.rows) keys.set(r.key, { ...k, rows: r.rows });
  }
  // A key's commands in turns up to `level`: weight · level of them, its RUNNING ones first.
  const rowsAt = (level: number, k: { base: number; rows: number; weight: number }): number =>
    Math.min(k.rows, Math.max(0, level * k.weight - k.base));
  const filled = (level: number): number => {
    let n = 0;
    for (const k of keys.values()) n += rowsAt(level, k);
    return n;
  };
  let low = 1;
  let high = Math.max(...[...keys.values()].map((k) => k.base + k.rows));
  if (filled(high) <= limit) return [...reads];
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if (filled(mid) >= limit) high = mid;
    else low = mid + 1;
  }
  return reads.flatMap((r) => {
    const rows = Math.min(r.rows, rowsAt(low, keys.get(r.key)!));
    return rows === 0 ? [] : [{ ...r, rows }];
  });
}

/**
 * What a claim takes from the rows of its leveled reads (`asked`, cut down from keyedReads'
 * `reads`): its take, when no row left unread could change it — every (key, priority) read for
 * fewer rows than keyedReads would have, that gave all it was asked for, has its next row ranked
 * after the take's last, or past its key's places — else the pairs to read again in full.
 */
function settledTake(
  candidates: readonly KeyedCandidate[],
  asked: readonly KeyedRead[],
  reads: readonly KeyedRead[],
  running: ReadonlyMap<string, number>,
  cap: number,
  limit: number,
  weights: KeyWeights,
): { readonly taken: KeyedCandidate[] } | { readonly reread: KeyedRead[] } {
  const turned = inTurns(candidates, running, cap, limit, weights);
  const last = turned.length >= limit ? turned[limit - 1] : undefined;
  const askedRows = new Map(asked.map((a) => [pairOf(a), a.rows]));
  const got = new Map<string, KeyedCandidate[]>();
  for (const c of candidates) {
    const of = got.get(pairOf(c));
    if (of === undefined) got.set(pairOf(c), [c]);
    else of.push(c);
  }
  const readOfKey = new Map<string, { priority: number; n: number }[]>();
  for (const r of reads) {
    const n = got.get(pairOf(r))?.length ?? 0;
    const of = readOfKey.get(r.key);
    if (of === undefined) readOfKey.set(r.key, [{ priority: r.priority, n }]);
    else of.push({ priority: r.priority, n });
  }
  /** Rows read of `key` at priorities up to `priority`: the rank its next unread row has at least. */
  const readUpTo = (key: string, priority: number): number =>
    (readOfKey.get(key) ?? []).reduce((n, r) => (r.priority <= priority ? n + r.n : n), 0);
  const cut = reads.filter((r) => {
    const askedFor = askedRows.get(pairOf(r)) ?? 0;
    const gave = got.get(pairOf(r)) ?? [];
    return askedFor < r.rows && gave.length === askedFor;
  });
  const unsettled = cut.some((r) => {
    const rank = readUpTo(r.key, r.priority);
    if (rank >= placesOf(running, r.key, cap, limit)) return false;
    if (last === undefined) return true;
    const turn = turnOf(runningOf(running, r.key) + rank, weightOf(weights, r.key));
    if (last.c.priority !== r.priority) return last.c.priority > r.priority;
    if (last.turn !== turn) return last.turn > turn;
    // Same turn: the next unread row comes after the pair's last read one in claim order.
    const lastRead = (got.get(pairOf(r)) ?? []).sort(byClaimOrder).at(-1);
    return lastRead === undefined || byClaimOrder(last.c, lastRead) > 0;
  });
  if (!unsettled) return { taken: turned.slice(0, limit).map((t) => t.c) };
  return { reread: cut };
}

/** The candidates of a settled claim: the first reads' rows, those of the pairs read again replaced. */
function withReread(
  first: readonly KeyedCandidate[],
  reread: readonly KeyedRead[],
  again: readonly KeyedCandidate[],
): KeyedCandidate[] {
  const replaced = new Set(reread.map(pairOf));
  return [...first.filter((c) => !replaced.has(pairOf(c))), ...again];
}

/** What a keyed claim asks of its reads: at most `cap` turns per key, `limit` in all, due at `nowMs`. */
export interface KeyedTake {
  readonly cap: number;
  readonly limit: number;
  readonly nowMs: number;
  /** A key limit counts each key's RUNNING commands; a rate limit per key counts none. */
  readonly countRunning: boolean;
  /** A weighted fair share's weights (none: every key takes one command per turn). */
  readonly weights?: KeyWeights;
}

/**
 * The due commands a keyed claim of up to `limit` takes, in turns (see keyedReads), read through
 * `reader`: the heads (and the RUNNING per key when `countRunning`), then the rows (see
 * keyedCandidatesFrom).
 */
export async function keyedCandidates(reader: KeyedClaimReader, r: KeyedTake): Promise<KeyedCandidate[]> {
  const { heads, running } = await reader.heads(r.countRunning);
  return keyedCandidatesFrom(heads, running, reader.rows, r);
}

/**
 * The due commands a keyed claim takes given the type's `heads` and RUNNING per key, read by
 * `rows`: each key's rows up to the level that fills the claim (leveledReads), and only when a key
 * had fewer than that, the rows of the keys that may give more, as far as they can be taken
 * (settledTake). The heads may be older than the RUNNING counts (read before the claim's lock,
 * those after it): a key's rows are read as they are now, and the counts bound what is taken.
 */
export async function keyedCandidatesFrom(
  heads: readonly KeyPriorityHead[],
  running: ReadonlyMap<string, number>,
  rows: KeyedClaimReader['rows'],
  r: KeyedTake,
): Promise<KeyedCandidate[]> {
  const weights = r.weights ?? NO_WEIGHTS;
  const reads = keyedReads(heads, running, r.cap, r.limit, r.nowMs, weights);
  if (reads.length === 0) return [];
  const asked = leveledReads(
    reads,
    (key) => runningOf(running, key),
    (key) => weightOf(weights, key),
    r.limit,
  );
  const first = await rows(asked);
  const settled = settledTake(first, asked, reads, running, r.cap, r.limit, weights);
  if ('taken' in settled) return settled.taken;
  const again = await rows(settled.reread);
  return inTurnsWithin(withReread(first, settled.reread, again), running, r.cap, r.limit, weights);
}

/** KeyedClaimReader's reads answered at once (SQLite's, inside its write transaction). */
export interface KeyedClaimReaderNow {
  readonly heads: (countRunning: boolean) => {
    readonly heads: readonly KeyPriorityHead[];
    readonly running: ReadonlyMap<string, number>;
  };
  readonly rows: (reads: readonly KeyedRead[]) => readonly KeyedCandidate[];
}

/** keyedCandidates through a reader that answers at once. */
export function keyedCandidatesNow(reader: KeyedClaimReaderNow, r: KeyedTake): KeyedCandidate[] {
  const { heads, running } = reader.heads(r.countRunning);
  const weights = r.weights ?? NO_WEIGHTS;
  const reads = keyedReads(heads, running, r.cap, r.limit, r.nowMs, weights);
  if (reads.length === 0) return [];
  const asked = leveledReads(
    reads,
    (key) => runningOf(running, key),
    (key) => weightOf(weights, key),
    r.limit,
  );
  const first = reader.rows(asked);
  const settled = settledTake(first, asked, reads, running, r.cap, r.limit, weights);
  if ('taken' in settled) return settled.taken;
  const again = reader.rows(settled.reread);
  return inTurnsWithin(withReread(first, settled.reread, again), running, r.cap, r.limit, weights);
}

/** RUNNING counts per key from rows of (key, count) as a driver returns them; NO_KEY left out. */
export function runningPerKey(
  rows: readonly { readonly key: string; readonly n: number | string }[],
): Map<string, number> {
  const running = new Map<string, number>();
  for (const r of rows) if (r.key !== NO_KEY) running.set(r.key, Number(r.n));
  return running;
}

/**
 * The keys of a keyed type with due PENDING commands (KeyLimitStore.keysWaiting), read through
 * `reader`: the heads and RUNNING per key, then of the `top` keys with the most RUNNING only their
 * first KEY_DUE_COUNTED due commands. `cap` is the type's key limit (null: none).
 */
export async function keysWaitingOf(
  reader: KeyedClaimReader,
  r: { readonly type: string; readonly cap: number | null; readonly top: number; readonly nowMs: number },
): Promise<KeysWaiting> {
  const { heads, running } = await reader.heads(true);
  const duePriorities = new Map<string, number[]>();
  for (const h of heads) {
    if (h.nextRunAtMs > r.nowMs) continue;
    const priorities = duePriorities.get(h.key);
    if (priorities === undefined) duePriorities.set(h.key, [h.priority]);
    else priorities.push(h.priority);
  }
  const keys = [...duePriorities.keys()];
  const cap = r.cap;
  const top = [...keys]
    .sort((a, b) => runningOf(running, b) - runningOf(running, a) || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, r.top);
  const reads = top.flatMap((key) =>
    (duePriorities.get(key) ?? []).map((priority) => ({ key, priority, rows: KEY_DUE_COUNTED })),
  );
  const rows = reads.length === 0 ? [] : await reader.rows(reads);
  const due = new Map<string, number>();
  for (const row of rows) due.set(row.key, (due.get(row.key) ?? 0) + 1);
  return {
    type: r.type,
    keys: keys.length,
    atLimit: cap === null ? 0 : keys.filter((k) => k !== NO_KEY && runningOf(running, k) >= cap).length,
    top: top.map((key) => ({
      key,
      due: Math.min(due.get(key) ?? 0, KEY_DUE_COUNTED),
      running: runningOf(running, key),
    })),
  };
}
