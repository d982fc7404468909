import type { CommandStore, TypeLimit, TypeLimitStore } from '@asynccmd/core';
import { DeclaredLimits } from './declared-limits.js';

/** The `typeLimits` option of this runtime, kept in the store's `<table>_type_limits`. */
export class DeclaredTypeLimits extends DeclaredLimits<TypeLimit, TypeLimitStore> {
  constructor(store: CommandStore, limits: Readonly<Record<string, number>>) {
    super(
      Object.entries(limits).map(([type, maxRunning]) => ({ type, maxRunning })),
      store.typeLimits,
      { option: 'typeLimits', keeps: 'type limits', dialect: store.dialect },
    );
  }

  /** Of `types`, those with a limit here; null when none has one (their claims stay plain). */
  among(types: readonly string[]): string[] | null {
    const limited = types.filter((t) => this.types.has(t));
    return limited.length === 0 ? null : limited;
  }
}
