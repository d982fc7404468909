import type { SqlExecutor, TransactionOpener } from '@asynccmd/core';
import { rowsOfResult, TransactionExecutors } from '@asynccmd/core';

/**
 * What asynccmd uses of a Prisma interactive transaction (the `tx` of
 * `prisma.$transaction(async (tx) => …)`): its public `$queryRawUnsafe`, which runs one statement
 * with bound parameters in that transaction. Typed structurally, so the package works with the
 * client your schema generated without importing it.
 */
export interface PrismaTransaction {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

/** What `asyncTransaction` uses of a PrismaClient: its interactive `$transaction`. */
export interface PrismaClientLike<Tx extends PrismaTransaction> {
  $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: PrismaTransactionOptions): PromiseLike<R>;
}

/** Prisma's options of an interactive transaction, passed through as given. */
export interface PrismaTransactionOptions {
  readonly maxWait?: number;
  readonly timeout?: number;
  readonly isolationLevel?: string;
}

const executors = new TransactionExecutors<PrismaTransaction>(async (tx, strings, values) => {
  // PostgreSQL's own placeholders, which $queryRawUnsafe passes to the driver as written.
  const text = strings.reduce((all, s, i) => `${all}$${i}${s}`);
  return rowsOfResult(await tx.$queryRawUnsafe(text, ...values));
});

/**
 * The SqlExecutor over a Prisma interactive transaction on PostgreSQL, for
 * `client.submit(prismaTx(tx), type, payload)`: the command is written through
 * `tx.$queryRawUnsafe`, so it commits or rolls back with the rest of `tx`. Inside `asyncTransaction`
 * the IMMEDIATE commands start at commit; in a `$transaction` of your own, call
 * `client.afterCommit(ids)` once it has resolved.
 */
export function prismaTx(tx: PrismaTransaction): SqlExecutor {
  return executors.of(tx);
}

/**
 * `prisma.$transaction(fn, options)`, after whose COMMIT the commands submitted with `prismaTx(tx)`
 * in it are dispatched (IMMEDIATE ones at once, the rest by waking the pollers), as
 * `client.transaction` does.
 */
export function asyncTransaction<Tx extends PrismaTransaction, T>(
  prisma: PrismaClientLike<Tx>,
  fn: (tx: Tx) => Promise<T>,
  options?: PrismaTransactionOptions,
): Promise<T> {
  return executors.runWithCommitHooks((register) =>
    Promise.resolve(
      prisma.$transaction(async (tx) => {
        register(tx);
        return fn(tx);
      }, options),
    ),
  );
}

/**
 * The opener a transactional executor declares (`transactional: prismaTransactions(prisma)`) to
 * run each attempt in a `prisma.$transaction` on the store's PostgreSQL database: `ctx.tx` is the
 * transaction client, and the executor's writes through it, its `ctx.submit`s and the command's
 * fenced SUCCESS commit together. Prisma ends an interactive transaction after `options.timeout`
 * (5 s by default): give it more than the executor's `timeoutMs`.
 */
export function prismaTransactions<Tx extends PrismaTransaction>(
  prisma: PrismaClientLike<Tx>,
  options?: PrismaTransactionOptions,
): TransactionOpener<Tx> {
  return {
    kind: 'transaction-opener',
    transaction: (fn) => asyncTransaction(prisma, (tx) => fn(tx, executors.of(tx)), options),
  };
}
