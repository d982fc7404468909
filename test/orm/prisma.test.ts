import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { asyncTransaction, prismaTransactions, prismaTx } from '@asynccmd/prisma';
import type { PrismaTransaction } from '@asynccmd/prisma';
import { defineTransactionalExecutor } from '@asynccmd/runtime';
import { PrismaPg } from '@prisma/adapter-pg';
import type pg from 'pg';
import { expectTypeOf } from 'vitest';
import { describeOrm } from './suite.js';

/** The parts of the generated client (and its transaction) the test uses. */
interface OrderClient extends PrismaTransaction {
  order: { create(args: { data: { note: string } }): PromiseLike<unknown> };
}
interface Client {
  $transaction<R>(fn: (tx: OrderClient) => Promise<R>): PromiseLike<R>;
  $disconnect(): Promise<void>;
}

/**
 * The `VARIABLE=value npx prisma generate` line of the package README, for where engines cannot be
 * downloaded: the test runs the generate with it, so the README says what works.
 */
function readmeGenerateEnv(): Record<string, string> {
  const readme = readFileSync(new URL('../../packages/prisma/README.md', import.meta.url), 'utf8');
  const line = /^([A-Z_]+)=(\S+) npx prisma generate$/m.exec(readme);
  if (!line?.[1] || !line[2])
    throw new Error('packages/prisma/README.md gives no `VAR=value npx prisma generate`');
  return { [line[1]]: line[2] };
}

/**
 * Generates the client of ./prisma/schema.prisma (Prisma 7, no query engine: the driver adapter
 * @prisma/adapter-pg runs the statements on pg). The CLI fetches its schema engine, which only
 * `migrate` and `db` commands run, before any command; that download is unreachable here, so the
 * README's variable names a file that is never run (`/bin/false` would fail the generate if it were).
 */
function generateClient(): void {
  const cli = createRequire(import.meta.url).resolve('prisma/build/index.js');
  const schema = fileURLToPath(new URL('./prisma/schema.prisma', import.meta.url));
  execFileSync(process.execPath, [cli, 'generate', '--schema', schema], {
    env: { ...process.env, ...readmeGenerateEnv(), PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    stdio: 'pipe',
  });
}

describeOrm<OrderClient>(
  'Prisma',
  'postgres',
  async (place) => {
    generateClient();
    // A runtime specifier: the generated client exists only once generateClient has run.
    const specifier = '@prisma/client';
    const { PrismaClient } = (await import(specifier)) as {
      PrismaClient: new (options: { adapter: PrismaPg }) => Client;
    };
    const prisma = new PrismaClient({
      adapter: new PrismaPg({ connectionString: place.url, max: 2 }, { schema: place.name }),
    });
    return {
      transaction: (fn) => asyncTransaction(prisma, fn),
      executor: prismaTx,
      insertOrder: async (tx, note) => void (await tx.order.create({ data: { note } })),
      transactions: prismaTransactions(prisma),
      close: () => prisma.$disconnect(),
    };
  },
  { transactionalExecutors: true },
);

/** Types only (never called): `ctx.tx` is the opener's transaction client, and must match it. */
export function prismaOpenerTypes(prisma: Client): void {
  defineTransactionalExecutor<OrderClient>()<'types.ok', { n: number }>({
    type: 'types.ok',
    transactional: prismaTransactions(prisma),
    execute: async (_p, ctx) => {
      expectTypeOf(ctx.tx).toEqualTypeOf<OrderClient>();
      await ctx.tx.order.create({ data: { note: 'n' } });
    },
  });
  defineTransactionalExecutor<pg.PoolClient>()<'types.wrong', { n: number }>({
    type: 'types.wrong',
    // @ts-expect-error a Prisma opener hands out its transaction client, not the declared handle type
    transactional: prismaTransactions(prisma),
    execute: async (_p, ctx) => void (await ctx.tx.query('SELECT 1')),
  });
}
