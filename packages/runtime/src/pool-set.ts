import { InvalidArgumentError } from '@asynccmd/core';
import { SHARED_POOL } from './executor-registry.js';
import { WorkPool, type PoolOptions, type PoolState } from './work-pool.js';

/** The shared pool plus the isolated pools executors name (so slow work never starves fast work). */
export class PoolSet {
  readonly #pools = new Map<string, WorkPool>();

  constructor(
    shared: PoolOptions,
    isolated: Readonly<Record<string, PoolOptions>>,
    onSlotFree: (pool: WorkPool) => void,
  ) {
    this.#pools.set(SHARED_POOL, new WorkPool(SHARED_POOL, shared, onSlotFree));
    for (const [name, options] of Object.entries(isolated)) {
      if (name === SHARED_POOL) {
        throw new InvalidArgumentError(
          `"${SHARED_POOL}" is the shared pool; configure it with \`sharedPool\``,
        );
      }
      this.#pools.set(name, new WorkPool(name, options, onSlotFree));
    }
  }

  get(name: string): WorkPool {
    const pool = this.#pools.get(name);
    if (!pool) throw new InvalidArgumentError(`no pool named "${name}"`);
    return pool;
  }

  all(): WorkPool[] {
    return [...this.#pools.values()];
  }

  names(): string[] {
    return [...this.#pools.keys()];
  }

  state(): PoolState[] {
    return this.all().map((p) => p.state());
  }

  async whenIdle(): Promise<void> {
    await Promise.all(this.all().map((p) => p.whenIdle()));
  }
}
