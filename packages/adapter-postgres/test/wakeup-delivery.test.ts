import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresCommandStore } from '../src/index.js';
import { adminQuery, command, DATABASE_URL, dropSchema, openStore, uniqueSchema } from './helpers.js';

/**
 * A wake-up must reach the other processes after the commit it announces, or a consumer that
 * waits for it claims too early, finds nothing and sleeps until its next poll. These tests give
 * the consumer no poll at all: only wake-ups make it claim.
 */

const schema = uniqueSchema('acpg_wake_delivery');
/** The advisory lock a 'held' command's COMMIT waits for (a deferred trigger takes it). */
const HOLD_KEY = 917_017;
let receiver: PostgresCommandStore;

beforeAll(async () => {
  receiver = await openStore(schema);
  // COMMIT of a transaction that inserted a 'held' command waits until the test lets it go.
  await adminQuery(`
    CREATE FUNCTION "${schema}".hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock(${HOLD_KEY}); RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON "${schema}".async_command
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.type = 'held')
      EXECUTE FUNCTION "${schema}".hold_commit();
    CREATE FUNCTION "${schema}".refuse_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'this command refuses to be claimed'; END $$;
    CREATE TRIGGER refuse_claim BEFORE UPDATE ON "${schema}".async_command
      FOR EACH ROW WHEN (NEW.type = 'refused' AND NEW.status = 'RUNNING')
      EXECUTE FUNCTION "${schema}".refuse_claim();
  `);
});

afterAll(async () => {
  await receiver?.close();
  await dropSchema(schema);
});

/**
 * A consumer driven by `store`'s wake-ups alone: each claims what is due of `types` (one claim at
 * a time; a wake-up during a claim runs one more after it). Returns the types claimed so far.
 */
async function consumer(
  store: PostgresCommandStore,
  types: string[],
): Promise<{ claimed: string[]; stop: () => Promise<void> }> {
  const claimed: string[] = [];
  let claiming: Promise<void> | null = null;
  let again = false;
  const claim = async (): Promise<void> => {
    do {
      again = false;
      const rows = await store.claimDue({
        types,
        limit: 10,
        now: new Date(),
        token: randomUUID(),
        leaseMs: 60_000,
      });
      claimed.push(...rows.map((r) => r.type));
    } while (again);
  };
  const stop = await store.wakeups.subscribe(() => {
    if (claiming) again = true;
    else claiming = claim().finally(() => (claiming = null));
  });
  return {
    claimed,
    stop: async () => {
      await stop();
      await claiming;
    },
  };
}

/** Waits (bounded, far below any poll interval) until `claimed` holds `type`. */
async function claimedSoon(claimed: readonly string[], type: string): Promise<void> {
  for (let i = 0; i < 1_000 && !claimed.includes(type); i++) await sleep(10);
  expect(claimed).toContain(type);
}

/** A store transaction that submits one command of `type` and announces it at commit. */
function submit(store: PostgresCommandStore, type: string): Promise<void> {
  return store.transaction(async (tx) => {
    await store.insert(tx, [command(type)]);
    expect(store.wakeups.notifyOnCommit(tx)).toBe(true);
  });
}

describe('PostgreSQL wake-up delivery', () => {
  it('sends a commit announcement folded into the window only once that COMMIT has returned', async () => {
    // The window is long enough for 'held' to be submitted inside it on a loaded machine.
    const windowMs = 3_000;
    const sender = await openStore(schema, { wakeupWindowMs: windowMs });
    const { claimed, stop } = await consumer(receiver, ['free', 'held']);
    const holder = new pg.Client({ connectionString: DATABASE_URL });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [HOLD_KEY]);
      await submit(sender, 'free'); // its NOTIFY rides on its COMMIT and opens the window
      const windowOpened = Date.now();
      await claimedSoon(claimed, 'free');
      expect(Date.now() - windowOpened, "'held' is submitted inside the window").toBeLessThan(windowMs / 2);
      const held = submit(sender, 'held'); // within the window: folded
      let waiting = false;
      for (const until = Date.now() + 20_000; !waiting && Date.now() < until;) {
        // Seen in pg_locks, not by the statement text of pg_stat_activity: BEGIN, INSERT and COMMIT
        // go out together, and the text shown while the COMMIT waits may be the INSERT or the COMMIT.
        const rows = await adminQuery(
          `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
             AND classid = 0 AND objid = $1 AND objsubid = 1`,
          [HOLD_KEY],
        );
        waiting = rows.length > 0;
        if (!waiting) await sleep(10);
      }
      expect(waiting, "'held' waits in its COMMIT").toBe(true);
      // The window ends while that COMMIT waits: a NOTIFY sent now would wake the consumer for a
      // row it cannot see yet, and nothing would wake it again.
      await sleep(Math.max(0, windowOpened + windowMs + 400 - Date.now()));
      expect(claimed).not.toContain('held');
      await holder.query('SELECT pg_advisory_unlock($1)', [HOLD_KEY]);
      await held;
      await claimedSoon(claimed, 'held');
    } finally {
      await holder.end();
      await stop();
      await sender.close();
    }
  });

  it('sends the wake-up again when the claim riding with it after the COMMIT fails and takes it along', async () => {
    const sender = await openStore(schema);
    let wakes = 0;
    const stop = await receiver.wakeups.subscribe(() => (wakes += 1));
    try {
      let claimed: Promise<unknown> | null = null;
      // The NOTIFY and the claim by id run after the COMMIT in one transaction of their own: the
      // claim's failure rolls the NOTIFY back, while the command stands committed.
      await sender.transaction(async (tx) => {
        const [id] = await sender.insert(tx, [command('refused')]);
        expect(sender.wakeups.notifyOnCommit(tx)).toBe(true);
        claimed = sender.claimByIdOnCommit(tx, {
          id: id!,
          now: new Date(Date.now() + 1000),
          token: randomUUID(),
          leaseMs: 60_000,
        });
      });
      await expect(claimed).rejects.toThrow('refuses to be claimed');
      for (let i = 0; i < 1_000 && wakes === 0; i++) await sleep(10);
      expect(wakes).toBeGreaterThan(0);
    } finally {
      await stop();
      await sender.close();
    }
  });

  it('sends on close the announcement still folded into the open window', async () => {
    // A window longer than the test: only close() can send what is folded into it.
    const sender = await openStore(schema, { wakeupWindowMs: 600_000 });
    const { claimed, stop } = await consumer(receiver, ['first', 'last']);
    try {
      await submit(sender, 'first');
      await claimedSoon(claimed, 'first');
      await submit(sender, 'last'); // folded into the window
      await sender.close();
      await claimedSoon(claimed, 'last');
    } finally {
      await stop();
      await sender.close();
    }
  });
});
