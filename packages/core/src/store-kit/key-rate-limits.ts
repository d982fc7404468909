import { requireKeyRateLimits } from '../key-limits.js';
import type { KeyRateLimit, KeyRateLimitStore } from '../ports/key-limits.js';
import { refillRateBucket } from '../rate-limits.js';
import { NO_KEY, type KeyedCandidate, type KeyedTake } from './keyed-reads.js';

/**
 * The most due commands a keyed-rate claim looks at: its keys' first `burst` each, in turns.
 * Keys whose buckets are empty still take their places, so a claim behind more than this many of
 * them finds nothing until those refill.
 */
export const KEY_RATE_CANDIDATES = 10_000;

/**
 * What a keyed-rate claim asks of keyedCandidates: each key's first `perKey` due commands in turns
 * (keys ranked by their first due command), at most KEY_RATE_CANDIDATES in all.
 */
export function keyRateTake(perKey: number, nowMs: number): KeyedTake {
  return { cap: perKey, limit: KEY_RATE_CANDIDATES, nowMs, countRunning: false };
}

/** keyedCandidates' answer as a keyed-rate claim's candidates: NO_KEY is none (null). */
export function asKeyRateCandidates(taken: readonly KeyedCandidate[]): KeyRateCandidate[] {
  return taken.map((c) => ({ id: c.id, key: c.key === NO_KEY ? null : c.key }));
}

/** A due command a keyed-rate claim may take: its id and key (null: none). */
export interface KeyRateCandidate {
  readonly id: string;
  readonly key: string | null;
}

/** A key's bucket as stored; a key without a row has a full bucket. */
export interface KeyRateBucketRow {
  readonly key: string;
  readonly tokens: number;
  /** Epoch milliseconds (fractional). */
  readonly refilledAtMs: number;
}

/** The statements of one keyed-rate claim, all inside the one transaction the adapter opened. */
export interface KeyRateClaimStatements<Row> {
  /** Locks the type's limit row; its limit and the database clock then (epoch ms), or null without one. */
  readonly lock: () => Promise<(KeyRateLimit & { readonly nowMs: number }) | null>;
  /**
   * The due, claimable commands of the type in turns (by priority, then rank within the key, then
   * due time and id), at most `perKey` of each key (every one without a key), at most
   * KEY_RATE_CANDIDATES in all.
   */
  readonly candidates: (keyField: string, perKey: number) => Promise<KeyRateCandidate[]>;
  /** The stored buckets of these keys. */
  readonly buckets: (keys: readonly string[]) => Promise<KeyRateBucketRow[]>;
  /** Claims these ids (those still PENDING), in claim order. */
  readonly claim: (ids: readonly string[]) => Promise<Row[]>;
  /**
   * Upserts these buckets, then deletes the type's buckets that are full again at `limit.nowMs`
   * (a key without a row has a full bucket), so the table holds the keys in use only.
   */
  readonly save: (
    buckets: readonly KeyRateBucketRow[],
    limit: KeyRateLimit & { readonly nowMs: number },
  ) => Promise<unknown>;
}

/** A keyed-rate claim's plan: the ids to claim, and the buckets to save once they are claimed. */
export interface KeyRatePlan {
  readonly picked: readonly string[];
  /** The buckets after the claim of `claimedIds` (those of `picked` the claim got). */
  spent(claimedIds: readonly string[]): KeyRateBucketRow[];
}

/**
 * Which of `candidates` (in turns) a claim of up to `max` takes: each key's bucket (`stored`,
 * else full) refilled to `limit.nowMs`, as many of its commands as it holds whole tokens.
 */
export function planKeyRateClaim(
  limit: KeyRateLimit & { readonly nowMs: number },
  candidates: readonly KeyRateCandidate[],
  stored: readonly KeyRateBucketRow[],
  max: number,
): KeyRatePlan {
  const byKey = new Map(stored.map((b) => [b.key, b]));
  const refilled = new Map<string, { tokens: number; atMs: number }>();
  const bucketOf = (key: string): { tokens: number; atMs: number } => {
    let bucket = refilled.get(key);
    if (bucket === undefined) {
      const b = byKey.get(key);
      bucket = refillRateBucket(
        { ...limit, tokens: b?.tokens ?? limit.burst, refilledAtMs: b?.refilledAtMs ?? limit.nowMs },
        limit.nowMs,
      );
      refilled.set(key, bucket);
    }
    return bucket;
  };
  const taken = new Map<string, number>();
  const picked: string[] = [];
  for (const c of candidates) {
    if (picked.length >= max) break;
    if (c.key !== null) {
      const used = taken.get(c.key) ?? 0;
      if (used >= Math.floor(bucketOf(c.key).tokens)) continue;
      taken.set(c.key, used + 1);
    }
    picked.push(c.id);
  }
  const keyOf = new Map(candidates.map((c) => [c.id, c.key]));
  return {
    picked,
    spent(claimedIds) {
      const spent = new Map<string, number>();
      for (const id of claimedIds) {
        const key = keyOf.get(id);
        if (key !== null && key !== undefined) spent.set(key, (spent.get(key) ?? 0) + 1);
      }
      return [...spent].map(([key, n]) => {
        const bucket = bucketOf(key);
        return { key, tokens: bucket.tokens - n, refilledAtMs: bucket.atMs };
      });
    },
  };
}

/**
 * One keyed-rate claim of up to `max` commands (core's token bucket per key): each key's bucket
 * refilled to the database clock read under the lock, as many of its commands claimed as it
 * holds whole tokens, and those spent — in the claim's own transaction, so nothing is given back.
 */
export async function claimWithinKeyRate<Row>(
  max: number,
  idOf: (row: Row) => string,
  sql: KeyRateClaimStatements<Row>,
  /** The claimed rows in the order the pool should start them (inTurns), given the key field. */
  order: (rows: Row[], keyField: string) => Row[] = (rows) => rows,
): Promise<Row[]> {
  const limit = await sql.lock();
  if (limit === null) return [];
  const candidates = await sql.candidates(limit.keyField, limit.burst);
  if (candidates.length === 0) return [];
  const keys = [...new Set(candidates.flatMap((c) => (c.key === null ? [] : [c.key])))];
  const plan = planKeyRateClaim(limit, candidates, keys.length === 0 ? [] : await sql.buckets(keys), max);
  if (plan.picked.length === 0) return [];
  const rows = await sql.claim(plan.picked);
  const spent = plan.spent(rows.map(idOf));
  if (spent.length > 0) await sql.save(spent, limit);
  return order(rows, limit.keyField);
}

/** The statements of an adapter's `<table>_key_rate_limits`, given checked input. */
export interface KeyRateLimitStatements {
  /** Stores the limits (at least one), each replacing its type's. */
  readonly write: (limits: readonly KeyRateLimit[]) => Promise<unknown>;
  /** Every stored row, ordered by type, its numbers as the driver returns them. */
  readonly read: () => Promise<readonly Record<keyof KeyRateLimit, string | number>[]>;
}

/** A KeyRateLimitStore over the adapter's two statements: `write` gets checked limits (at least one). */
export function keyRateLimitStore(
  write: (limits: readonly KeyRateLimit[]) => Promise<unknown>,
  read: () => Promise<readonly Record<keyof KeyRateLimit, string | number>[]>,
): KeyRateLimitStore {
  return {
    async declare(limits) {
      const checked = requireKeyRateLimits(limits);
      if (checked.length > 0) await write(checked);
    },
    async list() {
      return (await read()).map((r) => ({
        type: String(r.type),
        keyField: String(r.keyField),
        maxStarts: Number(r.maxStarts),
        periodMs: Number(r.periodMs),
        burst: Number(r.burst),
      }));
    },
  };
}
