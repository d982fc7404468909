import type Database from 'better-sqlite3';
import { CATALOG } from './catalog.js';

/**
 * The order service's own tables, in the same SQLite file as the command table: an order and the
 * commands of its deferred actions commit in one transaction.
 */
const STATEMENTS = [
  `CREATE TABLE IF NOT EXISTS orders (
     id             INTEGER PRIMARY KEY AUTOINCREMENT,
     -- the client's request id: the unique constraint makes a retried request find its order
     request_id     TEXT UNIQUE,
     request_hash   TEXT NOT NULL,
     operation_id   TEXT NOT NULL UNIQUE,
     customer_id    TEXT NOT NULL,
     email          TEXT NOT NULL,
     lines          TEXT NOT NULL,
     total_cents    INTEGER NOT NULL,
     inventory_mode TEXT NOT NULL CHECK (inventory_mode IN ('local', 'downstream')),
     -- how the follow-up runs: 'commands' (the split) or 'inline' (the all-synchronous variant)
     boundary       TEXT NOT NULL CHECK (boundary IN ('commands', 'inline')),
     status         TEXT NOT NULL CHECK (status IN ('CONFIRMED', 'AWAITING_INVENTORY', 'REJECTED')),
     version        INTEGER NOT NULL DEFAULT 1,
     created_at     INTEGER NOT NULL,
     decided_at     INTEGER,
     reject_reason  TEXT,
     -- all-synchronous variant only: the step whose failure the client saw as an error
     inline_failure TEXT
   )`,
  `CREATE TABLE IF NOT EXISTS stock (
     sku       TEXT PRIMARY KEY,
     available INTEGER NOT NULL CHECK (available >= 0)
   )`,
  // Which command carries which pending fact of an order (a fact may be re-submitted: latest wins).
  `CREATE TABLE IF NOT EXISTS order_command (
     order_id   INTEGER NOT NULL REFERENCES orders (id),
     fact       TEXT NOT NULL,
     command_id TEXT NOT NULL,
     PRIMARY KEY (order_id, fact)
   )`,
  // The simulated downstreams' ledger: how many times each side effect was delivered.
  `CREATE TABLE IF NOT EXISTS downstream_call (
     system   TEXT NOT NULL,
     key      TEXT NOT NULL,
     calls    INTEGER NOT NULL,
     first_at INTEGER NOT NULL,
     last_at  INTEGER NOT NULL,
     PRIMARY KEY (system, key)
   )`,
  // The read model the SCHEDULED projection command maintains.
  `CREATE TABLE IF NOT EXISTS customer_projection (
     customer_id   TEXT PRIMARY KEY,
     orders        INTEGER NOT NULL,
     total_cents   INTEGER NOT NULL,
     last_order_id INTEGER NOT NULL
   )`,
  `CREATE TABLE IF NOT EXISTS projection_applied (
     order_id INTEGER NOT NULL,
     version  INTEGER NOT NULL,
     PRIMARY KEY (order_id, version)
   )`,
];

export function migrateOrderSchema(db: Database.Database): void {
  db.transaction(() => {
    for (const sql of STATEMENTS) db.exec(sql);
    const seed = db.prepare('INSERT OR IGNORE INTO stock (sku, available) VALUES (?, ?)');
    for (const p of CATALOG) if (p.inventoryMode === 'local') seed.run(p.sku, p.stock);
  })();
}
