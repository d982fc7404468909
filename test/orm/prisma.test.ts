import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { asyncTransaction, prismaTx } from '@asynccmd/prisma';
import type { PrismaTransaction } from '@asynccmd/prisma';
import { PrismaPg } from '@prisma/adapter-pg';
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
 * Generates the client of ./prisma/schema.prisma (Prisma 7, no query engine: the driver adapter
 * @prisma/adapter-pg runs the statements on pg). The CLI fetches its schema engine, which only
 * `migrate` and `db` commands run, before any command; that download is unreachable here, so the
 * variable names a file that is never run (`/bin/false` would fail the generate if it were).
 */
function generateClient(): void {
  const cli = createRequire(import.meta.url).resolve('prisma/build/index.js');
  const schema = fileURLToPath(new URL('./prisma/schema.prisma', import.meta.url));
  execFileSync(process.execPath, [cli, 'generate', '--schema', schema], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false', PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    stdio: 'pipe',
  });
}

describeOrm<OrderClient>('Prisma', 'postgres', async (place) => {
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
    close: () => prisma.$disconnect(),
  };
});
