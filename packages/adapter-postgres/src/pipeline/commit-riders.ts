import type { Logger } from '@asynccmd/core';
import type { ClientBase } from 'pg';
import type { AfterCommit, CommitOutcome } from './commit.js';
import type { CommandRow } from '../rows.js';
import type { CommitCompanion, DeferredStatements } from './transaction.js';
import type { PostgresWakeups } from '../wakeups.js';

interface ClaimOnCommit {
  readonly values: readonly (string | null)[];
  readonly resolve: (row: CommandRow | null) => void;
  readonly reject: (error: Error) => void;
}

/**
 * What rides on the COMMIT of the store's own transactions, in the same round trip: the wake-up
 * NOTIFY (PostgresWakeups.notifyOnCommit) and the claim by id of one IMMEDIATE command
 * (claimByIdOnCommit). Both run after the commit, in a transaction of their own, so the command is
 * committed PENDING first and the claim is the same atomic claimById as ever — one round trip
 * sooner.
 */
export class CommitRiders implements CommitCompanion {
  readonly #open = new WeakMap<ClientBase, DeferredStatements>();
  readonly #claims = new WeakMap<ClientBase, ClaimOnCommit>();

  constructor(
    private readonly wakeups: PostgresWakeups,
    /** The claim-by-id statement run after COMMIT (prepared under `name`, if any); values arrive as text. */
    private readonly claimStatement: { readonly name?: string; readonly text: string },
    private readonly logger: Logger,
  ) {}

  /**
   * Registers the claim of one command to run right after `client`'s COMMIT; null when `client` is
   * not an open store transaction or already carries one. Settles after the commit: the claimed row,
   * or null (not claimable, or the transaction did not commit); rejects when the claim failed.
   */
  claimOnCommit(client: ClientBase, values: readonly (string | null)[]): Promise<CommandRow | null> | null {
    if (!this.#open.has(client) || this.#claims.has(client)) return null;
    return new Promise((resolve, reject) => {
      this.#claims.set(client, { values, resolve: (row) => resolve(row), reject });
    });
  }

  opened(client: ClientBase, deferred: DeferredStatements): void {
    this.#open.set(client, deferred);
    this.wakeups.opened(client);
  }

  /** What an open store transaction holds back (transaction.ts), or undefined for any other client. */
  deferred(client: ClientBase): DeferredStatements | undefined {
    return this.#open.get(client);
  }

  withCommit(client: ClientBase): AfterCommit | undefined {
    const notify = this.wakeups.statementAfterCommit(client);
    const claim = this.#claims.get(client);
    if (notify === undefined && claim === undefined) return undefined;
    return { statement: notify, query: claim && { ...this.claimStatement, values: claim.values } };
  }

  ended(client: ClientBase, outcome: CommitOutcome | null): void {
    this.#open.delete(client);
    this.wakeups.ended(client, outcome !== null && outcome.afterError !== null);
    const claim = this.#claims.get(client);
    this.#claims.delete(client);
    if (outcome?.afterError) {
      // The commit stands; the NOTIFY and the claim were rolled back: the NOTIFY is sent again
      // (wakeups.ended), the command stays PENDING for a claimer.
      this.logger.warn({ err: outcome.afterError }, 'asynccmd: PostgreSQL statements after COMMIT failed');
      claim?.reject(outcome.afterError);
    } else claim?.resolve((outcome?.rows[0] as CommandRow | undefined) ?? null);
  }
}
