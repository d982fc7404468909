import type { SqlSession } from './db/sql.js';
import { seededRandom, sleep } from './stats.js';

/** How a simulated downstream behaves: latency around `latencyMs` with a slow tail, and failures. */
export interface DownstreamProfile {
  /** Median-ish latency of one call. */
  readonly latencyMs: number;
  /** Fraction of calls that fail (0..1), after their latency. */
  readonly failureRate: number;
  /** Fraction of calls that take 5× as long (the tail every real dependency has). */
  readonly slowRate?: number;
  /**
   * Fraction of effects (by idempotency key) refused every time they are tried: records this
   * downstream cannot take, which retries never fix. Default 0.
   */
  readonly refusalRate?: number;
}

export type DownstreamName = 'inventory' | 'notification' | 'external' | 'projection';

export type DownstreamProfiles = Readonly<Record<DownstreamName, DownstreamProfile>>;

/** The default profile of the experiment: the same for both variants. */
export const DEFAULT_PROFILES: DownstreamProfiles = {
  inventory: { latencyMs: 40, failureRate: 0.02, slowRate: 0.02 },
  notification: { latencyMs: 30, failureRate: 0.05, slowRate: 0.02 },
  external: { latencyMs: 120, failureRate: 0.2, slowRate: 0.03 },
  projection: { latencyMs: 5, failureRate: 0, slowRate: 0 },
};

/**
 * `npm start`'s: the default, and an ERP that refuses about one order in a hundred for good, so the
 * built-in load leaves a few dead letters to look at (in the dashboard, or with the admin API).
 */
export const START_PROFILES: DownstreamProfiles = {
  ...DEFAULT_PROFILES,
  external: { ...DEFAULT_PROFILES.external, refusalRate: 0.01 },
};

export class DownstreamError extends Error {
  constructor(
    readonly downstream: DownstreamName,
    message: string,
  ) {
    super(`${downstream}: ${message}`);
    this.name = 'DownstreamError';
  }
}

/**
 * A stand-in for a remote system (SMS gateway, ERP, supplier). Each call takes simulated time and
 * may fail; a successful call is recorded in the downstream's own ledger (`downstream_call`) under
 * the caller's idempotency key (on the demo's own database), the way a real API with idempotency keys dedups — so the demo can
 * count how often the same side effect was delivered (at-least-once made visible).
 */
export class SimulatedDownstream {
  private profile: DownstreamProfile;
  private readonly random: () => number;
  private forcedDown: string | null = null;
  calls = 0;
  failures = 0;

  constructor(
    readonly name: DownstreamName,
    profile: DownstreamProfile,
    private readonly seed: number,
    private readonly db: SqlSession,
  ) {
    this.profile = profile;
    this.random = seededRandom(seed);
  }

  setProfile(profile: DownstreamProfile): void {
    this.profile = profile;
  }

  /** Every call fails with `reason` until `recover()`: an outage. */
  goDown(reason = 'service unavailable (simulated outage)'): void {
    this.forcedDown = reason;
  }

  recover(): void {
    this.forcedDown = null;
  }

  /**
   * Performs the side effect named by `key`. Resolves with the number of times this key has been
   * delivered so far (1 the first time); rejects with a DownstreamError on a (simulated) failure.
   * With `session` (a transaction of the demo's database), the delivery is recorded in it: a local
   * effect, committed or rolled back with that transaction.
   */
  async call(key: string, signal?: AbortSignal, session: SqlSession = this.db): Promise<number> {
    this.calls++;
    const slow = this.random() < (this.profile.slowRate ?? 0);
    const fail = this.random() < this.profile.failureRate;
    const jitter = 0.5 + this.random();
    await sleep(Math.round(this.profile.latencyMs * jitter * (slow ? 5 : 1)), signal);
    if (this.forcedDown !== null) {
      this.failures++;
      throw new DownstreamError(this.name, this.forcedDown);
    }
    if (refuses(key, this.seed, this.profile.refusalRate ?? 0)) {
      this.failures++;
      throw new DownstreamError(this.name, `answered 422: cannot take record ${key} (simulated)`);
    }
    if (fail) {
      this.failures++;
      throw new DownstreamError(this.name, 'answered 503 (simulated failure)');
    }
    const now = Date.now();
    await session.run(
      session.dialect === 'mysql'
        ? `INSERT INTO downstream_call (downstream, effect_key, calls, first_at, last_at) VALUES (?, ?, 1, ?, ?)
             ON DUPLICATE KEY UPDATE calls = calls + 1, last_at = VALUES(last_at)`
        : `INSERT INTO downstream_call (downstream, effect_key, calls, first_at, last_at) VALUES (?, ?, 1, ?, ?)
             ON CONFLICT (downstream, effect_key) DO UPDATE SET calls = downstream_call.calls + 1,
               last_at = excluded.last_at`,
      [this.name, key, now, now],
    );
    const [row] = await session.all<{ calls: number | string }>(
      'SELECT calls FROM downstream_call WHERE downstream = ? AND effect_key = ?',
      [this.name, key],
    );
    return Number(row?.calls ?? 1);
  }
}

/** Whether the effect `key` is one of the `rate` refused for good: the same answer on every try. */
function refuses(key: string, seed: number, rate: number): boolean {
  if (rate <= 0) return false;
  // FNV-1a: a stable, evenly spread number per key.
  let hash = 0x811c9dc5 ^ seed;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) / 2 ** 32 < rate;
}

export type Downstreams = Readonly<Record<DownstreamName, SimulatedDownstream>>;

export function createDownstreams(db: SqlSession, profiles: DownstreamProfiles, seed = 42): Downstreams {
  return {
    inventory: new SimulatedDownstream('inventory', profiles.inventory, seed + 1, db),
    notification: new SimulatedDownstream('notification', profiles.notification, seed + 2, db),
    external: new SimulatedDownstream('external', profiles.external, seed + 3, db),
    projection: new SimulatedDownstream('projection', profiles.projection, seed + 4, db),
  };
}

/**
 * The same profile with every latency multiplied by `latency` and every failure rate by `failures`
 * (capped at 1): `--latency-scale 10` for slow downstreams, `--failure-scale 0` for none failing.
 */
export function scaleProfiles(
  profiles: DownstreamProfiles,
  latency: number,
  failures = 1,
): DownstreamProfiles {
  const scaled = (p: DownstreamProfile): DownstreamProfile => ({
    ...p,
    latencyMs: p.latencyMs * latency,
    failureRate: Math.min(1, p.failureRate * failures),
    refusalRate: Math.min(1, (p.refusalRate ?? 0) * failures),
  });
  return {
    inventory: scaled(profiles.inventory),
    notification: scaled(profiles.notification),
    external: scaled(profiles.external),
    projection: scaled(profiles.projection),
  };
}
