// `prisma`: the application's generated PrismaClient, as far as the examples use it.
import type { PrismaTransaction, PrismaTransactionOptions } from '@asynccmd/prisma';

interface PreludePrismaTransaction extends PrismaTransaction {
  readonly order: { create(args: { data: { id: string; status: string } }): Promise<unknown> };
}
export declare const prisma: {
  $transaction<R>(
    fn: (tx: PreludePrismaTransaction) => Promise<R>,
    options?: PrismaTransactionOptions,
  ): Promise<R>;
};
