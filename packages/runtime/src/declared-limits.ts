import { InvalidArgumentError } from '@asynccmd/core';

/** A store's table of per-type limits, as the runtime writes it. */
interface LimitTable<L> {
  declare(limits: readonly L[]): Promise<void>;
}

/**
 * Per-type limits of this runtime's options that live in a table of the store: written before
 * they are first needed, once (again after a failed try). Claims then read the stored rows, so the
 * limit in force is the one last declared by any instance.
 */
export abstract class DeclaredLimits<L extends { readonly type: string }, S extends LimitTable<L>> {
  /** The types with a limit here. */
  readonly types: ReadonlySet<string>;
  protected readonly store: S | null;
  readonly #limits: readonly L[];
  #declared: Promise<void> | null = null;

  protected constructor(
    limits: readonly L[],
    store: S | undefined,
    refusal: { readonly option: string; readonly keeps: string; readonly dialect: string },
  ) {
    this.#limits = limits;
    this.types = new Set(limits.map((l) => l.type));
    this.store = store ?? null;
    if (limits.length > 0 && this.store === null) {
      throw new InvalidArgumentError(
        `asynccmd option \`${refusal.option}\` needs a store that keeps ${refusal.keeps}; the ${refusal.dialect} store does not`,
      );
    }
  }

  /** Resolves once the limits are stored; a failure is retried by the next call. */
  ready(): Promise<void> {
    if (this.store === null) return Promise.resolve();
    this.#declared ??= this.store.declare(this.#limits).catch((error: unknown) => {
      this.#declared = null;
      throw error;
    });
    return this.#declared;
  }
}
