import type { Pool, ResultSetHeader } from 'mysql2/promise';
import {
  type Queryable,
  inTransaction,
  LostRaceError,
  retryConnectionLoss,
  rollbackQuietly,
  select,
  selectEach,
  withConnection,
  write,
} from './connection.js';
import type { CommandRow } from './rows.js';
import type { MysqlSql } from './sql.js';

/**
 * Step 1 of the two-step token claim, and the lock taken on hung rows: the only places where
 * servers with SKIP LOCKED and older servers differ. Step 2 (read back by token) is shared.
 */
export interface ClaimStrategy {
  readonly name: ClaimStrategyName;
  readonly skipLocked: boolean;
  /** Marks up to `limit` due rows RUNNING with `token` and reads them back by it. */
  claim(pools: ClaimPools, sql: MysqlSql, round: ClaimRound): Promise<CommandRow[]>;
  /** The locking clause that picks hung rows without two reclaimers fighting over them. */
  readonly hungLock: string;
}

export type ClaimStrategyName = 'skip-locked' | 'legacy';

export interface ClaimPools {
  /** The store's pool: sessions at the server's default isolation, one statement per query. */
  readonly pool: Pool;
  /**
   * A pool of the store's own whose sessions are READ COMMITTED and take several statements per
   * query (see connection.ts `claimPoolOptions`); null on a caller's pool, which the store does not
   * reconfigure.
   */
  readonly claimPool: Pool | null;
}

export interface ClaimRound {
  readonly token: string;
  /** Who claims (recorded as claimed_by); null when the caller named none. */
  readonly instance: string | null;
  readonly leaseMicros: number;
  /** Application-clock now, as UTC text. */
  readonly now: string;
  readonly types: readonly string[];
  readonly limit: number;
  /**
   * Read the candidates without locks, then lock them by primary key (sql.ts lockDueUnlocked):
   * while claims from the head are slow (core store-kit head-skip.ts). SKIP LOCKED servers only.
   */
  readonly unlockedCandidates?: boolean;
}

/** Step 1's statement and values: the candidates locked as the claim index is read, or read first. */
function lockDue(sql: MysqlSql, r: ClaimRound): [string, unknown[]] {
  return r.unlockedCandidates
    ? [sql.lockDueUnlocked, [r.now, r.types, 2 * r.limit, r.now, r.limit]]
    : [sql.lockDue, [r.now, r.types, r.limit]];
}

/**
 * A round of several types as rounds of one type each: the claim index is led by type, and a read
 * of several types in claim order would sort all their due rows (and lock them, for a locking
 * read). The first rows of all of them in claim order, counted per type without locks (sql.ts
 * firstOfTypes), say how many each type takes; each type then claims that many of its own, in its order. Rows
 * other claimers hold are passed over within each type, so under contention a round takes rows a
 * little past where one claim order would stop, never fewer than there are. One type: as it is.
 */
async function roundsPerType(db: Queryable, sql: MysqlSql, r: ClaimRound): Promise<ClaimRound[]> {
  if (r.types.length <= 1) return [r];
  const shares = await select<{ type: string; n: number | string }>(db, sql.firstOfTypes(r.types.length), [
    ...r.types.flatMap((type) => [r.now, type, r.limit]),
    r.limit,
  ]);
  return shares.map(({ type, n }) => ({ ...r, types: [type], limit: Number(n) }));
}

/** Step 1 of each round in one transaction on `conn`: the ids locked, in the rounds' order. */
async function lockRounds(conn: Queryable, sql: MysqlSql, rounds: readonly ClaimRound[]): Promise<string[]> {
  const ids: string[] = [];
  for (const round of rounds) {
    ids.push(...(await select<{ id: string }>(conn, ...lockDue(sql, round))).map((c) => c.id));
  }
  return ids;
}

/**
 * MySQL ≥ 8.0.1, MariaDB ≥ 10.6: a short READ COMMITTED transaction locks this round's candidates
 * with FOR UPDATE SKIP LOCKED (concurrent claimers take different rows instead of queueing on, or
 * deadlocking over, the same ones), marks exactly those, and commits. READ COMMITTED takes no gap
 * locks, so claimers and submitters do not block each other either.
 */
export const skipLockedStrategy: ClaimStrategy = {
  name: 'skip-locked',
  skipLocked: true,
  hungLock: 'FOR UPDATE SKIP LOCKED',
  async claim({ pool, claimPool }, sql, r) {
    if (claimPool !== null) return claimInTwoTrips(claimPool, sql, r);
    const rounds = await roundsPerType(pool, sql, r);
    if (rounds.length === 0) return [];
    const marked = await inTransaction(pool, true, async (conn) => {
      const ids = await lockRounds(conn, sql, rounds);
      if (ids.length === 0) return 0;
      return (await write(conn, sql.markClaimed, [r.token, r.instance, r.leaseMicros, ids])).affectedRows;
    });
    return marked === 0 ? [] : readBack(pool, sql, r.token).then((rows) => unlessLost(marked, rows));
  },
};

/**
 * Rows marked but none read back by the token after the commit: the transaction was undone under
 * it (on Galera, another node's claim of the same rows aborted it, which a COMMIT does not always
 * report). A lost race, tried again at once (connection.ts retryLockConflicts).
 */
function unlessLost(marked: number, rows: CommandRow[]): CommandRow[] {
  if (marked > 0 && rows.length === 0) throw new LostRaceError('claim');
  return rows;
}

/**
 * The same transaction on a claim connection (already READ COMMITTED), in two round trips: begin
 * and lock the candidates; then mark them, commit, and read them back by token. The read comes
 * after the commit, never inside the transaction: on Galera another node's claim of the same rows
 * can abort the transaction between its statements (its locks are node-local), and what it read
 * of its own writes would then be rows it never held. A statement that fails stops the rest of its
 * trip, so a failed mark never commits; a connection lost on the way is settled by the caller's
 * read-back by token.
 */
async function claimInTwoTrips(claimPool: Pool, sql: MysqlSql, r: ClaimRound): Promise<CommandRow[]> {
  return withConnection(claimPool, async (conn) => {
    const rounds = await roundsPerType(conn, sql, r);
    if (rounds.length === 0) return [];
    try {
      const locks = rounds.map((round) => lockDue(sql, round));
      const [, ...locked] = await selectEach(
        conn,
        `START TRANSACTION; ${locks.map(([statement]) => statement).join('; ')}`,
        locks.flatMap(([, values]) => values),
      );
      // A statement the server refused ends the trip with its error; all came back here.
      if (locked.length !== locks.length) throw new LostRaceError('claim');
      const ids = locked.flatMap((rows) => (rows as { id: string }[]).map((c) => c.id));
      if (ids.length === 0) {
        await conn.query('COMMIT');
        return [];
      }
      const results = await selectEach(conn, `${sql.markClaimed}; COMMIT; ${sql.claimedBy}`, [
        r.token,
        r.instance,
        r.leaseMicros,
        ids,
        r.token,
      ]);
      const [marked, , claimed] = results;
      // A trip the server ended early (a transaction aborted between its statements stops the
      // rest) answers fewer results: nothing it read can be trusted, and the next try settles it.
      if (results.length !== 3 || !Array.isArray(claimed)) throw new LostRaceError('claim');
      return unlessLost((marked as ResultSetHeader).affectedRows, claimed as CommandRow[]);
    } catch (e) {
      await rollbackQuietly(conn);
      throw e;
    }
  });
}

/** Step 2 on its own: this round's rows by their fresh token; a read is safe to try twice. */
function readBack(pool: Pool, sql: MysqlSql, token: string): Promise<CommandRow[]> {
  return retryConnectionLoss(() => select<CommandRow>(pool, sql.claimedBy, [token]));
}

/** Empty legacy rounds re-checked before giving up (see below). */
const LEGACY_EMPTY_ROUND_RETRIES = 3;

/**
 * Older servers: a single UPDATE joined to a derived table of candidates it locks as it reads them,
 * in autocommit. Concurrent claimers queue on each other's row locks and then pass over the rows
 * taken meanwhile; should a round still come back empty (the outer guard re-checks each row) while
 * due rows remain, it looks again (a few times), so an empty answer means nothing was left to claim.
 */
export const legacyStrategy: ClaimStrategy = {
  name: 'legacy',
  skipLocked: false,
  hungLock: 'FOR UPDATE',
  async claim({ pool }, sql, r) {
    let marked = 0;
    for (const round of await roundsPerType(pool, sql, r)) marked += await markDueLegacy(pool, sql, round);
    return marked === 0 ? [] : unlessLost(marked, await readBack(pool, sql, r.token));
  },
};

async function markDueLegacy(pool: Pool, sql: MysqlSql, r: ClaimRound): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const marked = await write(pool, sql.markDueLegacy, [
      r.now,
      r.types,
      r.limit,
      r.token,
      r.instance,
      r.leaseMicros,
      r.now,
      r.types,
    ]);
    if (marked.affectedRows > 0 || attempt >= LEGACY_EMPTY_ROUND_RETRIES) return marked.affectedRows;
    const due = await select(pool, sql.anyDue, [r.now, r.types]);
    if (due.length === 0) return 0;
  }
}

export const CLAIM_STRATEGIES: { readonly [N in ClaimStrategyName]: ClaimStrategy } = {
  'skip-locked': skipLockedStrategy,
  legacy: legacyStrategy,
};

/** SKIP LOCKED arrived in MySQL 8.0.1 and MariaDB 10.6. */
export function strategyForServer(version: string): ClaimStrategyName {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!m) return 'legacy';
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const atLeast = (a: number, b: number, c: number): boolean =>
    major !== a ? major > a : minor !== b ? minor > b : patch >= c;
  return /mariadb/i.test(version)
    ? atLeast(10, 6, 0)
      ? 'skip-locked'
      : 'legacy'
    : atLeast(8, 0, 1)
      ? 'skip-locked'
      : 'legacy';
}
