/** Most transactional attempts one transaction takes by default (options `transactionGroupSize`). */
export const DEFAULT_TRANSACTION_GROUP = 32;
/** A savepoint each: PostgreSQL caches 64 subtransactions per session before snapshots get slow. */
export const MAX_TRANSACTION_GROUP = 32;
/**
 * A transaction takes no further attempt once open this long by default (options
 * `transactionGroupMs`): its first attempts' SUCCESS (and their row locks) wait for its COMMIT, so
 * only quick attempts share one.
 */
export const GROUP_MS = 20;
/** The longest `transactionGroupMs`: the row locks of a shared transaction's first attempts are held about that long. */
export const MAX_GROUP_MS = 1000;
