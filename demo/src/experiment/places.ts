import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkSchemaName,
  dialectOf,
  dropTarget,
  generatedSchemaName,
  redactUrl,
  serverTarget,
  type DatabaseTarget,
} from '../db/database.js';

/**
 * Where each part of the experiment keeps its data: a database of its own per variant, per rate of
 * the sweep and per failure check. On SQLite a file per part in a temporary directory; on
 * PostgreSQL a schema per part, on MySQL/MariaDB a database per part, named `<prefix>_<part>`.
 * Generated names are dropped at the end; a prefix given with --schema is kept for a look.
 */
export interface Places {
  readonly description: string;
  /** Whether `cleanup()` leaves the parts in place (a prefix given by the caller). */
  readonly kept: boolean;
  target(part: string): DatabaseTarget;
  cleanup(): Promise<void>;
}

/** `db`: null for SQLite, or a postgres:// / mysql:// URL. */
export function experimentPlaces(db: string | null, schemaPrefix: string | null): Places {
  if (db === null) {
    const dir = mkdtempSync(join(tmpdir(), 'asynccmd-experiment-'));
    return {
      description: 'SQLite (better-sqlite3, WAL), one file per part',
      kept: false,
      target: (part) => ({ dialect: 'sqlite', file: join(dir, `${part}.db`) }),
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const prefix = schemaPrefix === null ? generatedSchemaName('asynccmd_exp') : checkSchemaName(schemaPrefix);
  const made = new Map<string, DatabaseTarget>();
  const server = dialectOf(db) === 'postgres' ? 'PostgreSQL, one schema' : 'MySQL/MariaDB, one database';
  return {
    description: `${server} per part (${prefix}_<part>) on ${redactUrl(db)}`,
    kept: schemaPrefix !== null,
    target: (part) => {
      let t = made.get(part);
      if (!t) made.set(part, (t = serverTarget(db, `${prefix}_${part}`)));
      return t;
    },
    cleanup: async () => {
      if (schemaPrefix !== null) return;
      for (const t of made.values()) await dropTarget(t);
    },
  };
}
