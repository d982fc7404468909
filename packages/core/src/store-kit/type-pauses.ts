import { optionalPauseReason, requireStoredType } from '../input-checks.js';
import type { PausedType, TypePauseStore } from '../ports/store.js';

/** The statements of an adapter's `<table>_paused_types`, given checked input. */
export interface TypePauseStatements {
  /** Inserts the row (paused now, on the database clock) unless the type has one; true if inserted. */
  readonly insert: (type: string, reason: string | null) => Promise<boolean>;
  /** Deletes the type's row; true if there was one. */
  readonly remove: (type: string) => Promise<boolean>;
  /** Every row, ordered by type. */
  readonly read: () => Promise<PausedType[]>;
}

/** A TypePauseStore over the adapter's three statements: every call's input is checked first. */
export function typePauseStore(sql: TypePauseStatements): TypePauseStore {
  return {
    pause: async (type, reason) =>
      sql.insert(requireStoredType('a type pause', type), optionalPauseReason(reason)),
    resume: async (type) => sql.remove(requireStoredType('a type pause', type)),
    list: () => sql.read(),
  };
}
