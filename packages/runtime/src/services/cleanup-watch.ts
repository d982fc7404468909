import type { CleanupHorizonProbe, Logger } from '@asynccmd/core';
import { formatDuration } from '../ops/duration.js';
import type { StoreOutage } from '../store-outage.js';
import { PeriodicService, type RunOutcome } from './periodic-service.js';

/** The runtime's `cleanupWatch` option. */
export interface CleanupWatchOptions {
  /** How often it looks. Default 1 min. */
  readonly intervalMs?: number;
  /** A hold older than this is logged as a warning (once per holder, and once when it ends). Default 1 min. */
  readonly warnAfterMs?: number;
}

export const DEFAULT_CLEANUP_WATCH_INTERVAL_MS = 60_000;
export const DEFAULT_CLEANUP_WARN_AFTER_MS = 60_000;

/**
 * Watches what keeps the database from cleaning up the command table (a long transaction or
 * snapshot elsewhere, a forgotten prepared transaction), where the store can tell: while it
 * lasts, dead rows pile up and claims slow down, and an operator should hear of it from the log
 * before the backlog tells them. A probe the database refuses (a missing privilege) is logged
 * once and is no outage: the queue works without it.
 */
export class CleanupWatch extends PeriodicService {
  readonly #warnAfterMs: number;
  /** The holder last warned about, until it lets go. */
  #warnedAbout: string | null = null;
  #unreadable = false;

  constructor(
    private readonly probe: CleanupHorizonProbe,
    outage: StoreOutage,
    private readonly logger: Logger,
    options: CleanupWatchOptions,
  ) {
    const intervalMs = options.intervalMs ?? DEFAULT_CLEANUP_WATCH_INTERVAL_MS;
    super(
      { operation: 'cleanupHorizon', intervalMs, runOnStart: false, maxOutageDelayMs: intervalMs },
      outage,
    );
    this.#warnAfterMs = options.warnAfterMs ?? DEFAULT_CLEANUP_WARN_AFTER_MS;
  }

  protected async work(): Promise<RunOutcome> {
    let horizon;
    try {
      horizon = await this.probe.read();
    } catch (err) {
      if (!this.#unreadable) {
        this.#unreadable = true;
        this.logger.warn(
          { err },
          'asynccmd cannot read what holds back the database cleanup of its table (PostgreSQL: pg_read_all_stats; MySQL: PROCESS); not watched until it can',
        );
      }
      return 'done';
    }
    this.#unreadable = false;
    const { oldest, deadRows, lastCleanupAt } = horizon;
    const held = oldest?.heldForMs ?? null;
    if (oldest && held !== null && held >= this.#warnAfterMs) {
      if (this.#warnedAbout === oldest.description) return 'done';
      this.#warnedAbout = oldest.description;
      this.logger.warn(
        { holder: oldest.description, kind: oldest.kind, heldForMs: held, deadRows, lastCleanupAt },
        `asynccmd: a ${oldest.kind.replace('-', ' ')} (${oldest.description}) has kept the database from cleaning up finished commands for ${formatDuration(held)}` +
          `${deadRows === null ? '' : `; ${deadRows} dead row versions wait`}: claims slow down until it ends`,
      );
    } else if (this.#warnedAbout !== null) {
      this.logger.info(
        { holder: this.#warnedAbout, deadRows },
        'asynccmd: the transaction that held back the database cleanup has ended',
      );
      this.#warnedAbout = null;
    }
    return 'done';
  }
}
