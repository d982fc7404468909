import type { CommandStore, TypeLimit, TypeLimitStore } from '@asynccmd/core';
import { InvalidArgumentError } from '@asynccmd/core';

/**
 * The `typeLimits` option of this runtime: written to the store's `<table>_type_limits` before the
 * first claim of a limited type, once (again after a failed try). The claims then read the stored
 * row, so the limit in force is the one last declared by any instance.
 */
export class DeclaredTypeLimits {
  /** The types this runtime claims within their limits. */
  readonly types: ReadonlySet<string>;
  readonly #limits: readonly TypeLimit[];
  readonly #store: TypeLimitStore | null;
  #declared: Promise<void> | null = null;

  constructor(store: CommandStore, limits: Readonly<Record<string, number>>) {
    this.#limits = Object.entries(limits).map(([type, maxRunning]) => ({ type, maxRunning }));
    this.types = new Set(this.#limits.map((l) => l.type));
    this.#store = store.typeLimits ?? null;
    if (this.#limits.length > 0 && this.#store === null) {
      throw new InvalidArgumentError(
        `asynccmd option \`typeLimits\` needs a store that keeps type limits; the ${store.dialect} store does not`,
      );
    }
  }

  /** Of `types`, those with a limit here; null when none has one (their claims stay plain). */
  among(types: readonly string[]): string[] | null {
    const limited = types.filter((t) => this.types.has(t));
    return limited.length === 0 ? null : limited;
  }

  /** Resolves once the limits are stored; a failure is retried by the next call. */
  ready(): Promise<void> {
    if (this.#store === null) return Promise.resolve();
    this.#declared ??= this.#store.declare(this.#limits).catch((error: unknown) => {
      this.#declared = null;
      throw error;
    });
    return this.#declared;
  }
}
