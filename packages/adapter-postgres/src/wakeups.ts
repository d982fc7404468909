import type { ClientBase, ClientConfig, Notification, Pool } from 'pg';
import pg from 'pg';
import { NotifyWakeups } from './notify-wakeups.js';
import type { Logger } from '@asynccmd/core';

export interface PostgresWakeupsOptions {
  /** Sends the NOTIFYs (outside any caller transaction). */
  readonly pool: Pool;
  /**
   * Opens the dedicated LISTEN connection, which also runs the claim that follows a notification
   * (see lendAfterWake): give it the hot path's session settings. Null: no LISTEN at all (the store
   * is reached only through a transaction pooler, where a LISTEN would stay on a server connection
   * other clients then use): NOTIFYs are still sent, for processes that listen, and subscribers
   * are never woken, so their poll loop finds the work.
   */
  readonly clientConfig: ClientConfig | null;
  readonly channel: string;
  /** At most one NOTIFY per window per process. */
  readonly windowMs: number;
  /** Reconnect delays: doubling from the first to the last, with jitter. */
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  readonly logger: Logger;
}

/**
 * Cross-process wake-ups over LISTEN/NOTIFY on pg (notify-wakeups.ts: the coalesced NOTIFY, the
 * subscribers, the revocations).
 *
 * For the store's own transactions, notifyOnCommit(tx) sends the NOTIFY right after their COMMIT in
 * the same round trip (see pipeline/README.md): listeners hear of the work as the commit returns,
 * a round trip earlier than a NOTIFY sent once COMMIT has come back.
 *
 * subscribe() holds one dedicated LISTEN connection. When it dies (server restart,
 * pg_terminate_backend, network) it reconnects on its own with backoff and then wakes the
 * subscribers once, since notifications sent meanwhile were lost; until then the poll loop is the
 * fallback.
 *
 * lendAfterWake() lets the one claim that follows a notification run on the LISTEN connection.
 */
export class PostgresWakeups extends NotifyWakeups {
  /** The store's transactions still open, and those of them to announce at commit. */
  private readonly open = new WeakSet<ClientBase>();
  private readonly announce = new WeakSet<ClientBase>();
  /** Those whose COMMIT went out while a window was open: announced once it has returned. */
  private readonly folded = new WeakSet<ClientBase>();
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  /** The statement running on the LISTEN connection for lendAfterWake(), settled either way; null when free. */
  private lent: Promise<void> | null = null;
  /** A notification arrived since the LISTEN connection was last lent. */
  private notified = false;

  constructor(private readonly pgOptions: PostgresWakeupsOptions) {
    super({
      channel: pgOptions.channel,
      windowMs: pgOptions.windowMs,
      logger: pgOptions.logger,
      send: (channel, payload) => pgOptions.pool.query('SELECT pg_notify($1, $2)', [channel, payload]),
    });
  }

  /** Whether subscribers can be woken at all: false when there is no LISTEN connection to open. */
  get delivers(): boolean {
    return this.pgOptions.clientConfig !== null;
  }

  /** Whether the LISTEN connection is up (for tests and health details). */
  get listening(): boolean {
    return this.client !== null;
  }

  protected async startListening(): Promise<void> {
    if (this.client === null) await this.ensureListening();
  }

  /**
   * Runs `use` on the LISTEN connection when a notification arrived since it was last lent and it
   * is free; null otherwise (run it elsewhere). For the claim that follows a wake-up: that backend
   * has just run (it delivered the notification) and answers sooner than a pooled one idle since
   * the last command (measured: the claim's round trip p50 0.6 → 0.4 ms). Other claims — a drain's
   * refills, polls — stay on the pool: lent for every claim, the connection added a busy backend
   * per process and cost ~10 % of a CPU-bound drain. A notification arriving during the statement
   * is delivered once it is over.
   */
  lendAfterWake<T>(use: (client: ClientBase) => Promise<T>): Promise<T> | null {
    const client = this.client;
    if (client === null || this.lent !== null || !this.notified) return null;
    this.notified = false;
    const running = use(client);
    const lent: Promise<void> = running.then(
      () => this.returned(lent),
      () => this.returned(lent),
    );
    this.lent = lent;
    return running;
  }

  private returned(lent: Promise<void>): void {
    if (this.lent === lent) this.lent = null;
  }

  notifyOnCommit(tx: ClientBase): boolean {
    if (this.closed || !this.open.has(tx)) return false;
    this.announce.add(tx);
    return true;
  }

  /** A store transaction began: notifyOnCommit may be asked for it until it ends. */
  opened(client: ClientBase): void {
    this.open.add(client);
  }

  /**
   * The NOTIFY to send with this transaction's COMMIT, if it asked for one and the window is free.
   * Otherwise it joins the window's NOTIFY, but only once its COMMIT has returned (ended): the
   * window may end while the COMMIT is still under way, and a NOTIFY sent then, on another
   * connection, can reach a listener before the row is visible — its claim finds nothing, and
   * nothing wakes it again.
   */
  statementAfterCommit(client: ClientBase): string | undefined {
    if (this.closed || !this.announce.has(client)) return undefined;
    if (this.windowTimer !== null) {
      this.folded.add(client);
      return undefined;
    }
    this.openWindow();
    return `NOTIFY "${this.options.channel}"`;
  }

  /**
   * The transaction is over. One whose announcement was folded joins the window's NOTIFY now —
   * also when its COMMIT failed, whose outcome is unknown: a NOTIFY too many costs a claim. So
   * does one whose statements after the COMMIT failed (`afterCommitFailed`): they ran in one
   * transaction, and their failure rolled back the NOTIFY among them.
   */
  ended(client: ClientBase, afterCommitFailed = false): void {
    this.open.delete(client);
    const announced = this.announce.delete(client);
    if (this.folded.delete(client) || (announced && afterCommitFailed)) this.sendSoon();
  }

  private ensureListening(): Promise<void> {
    this.connecting ??= this.connect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ ...this.pgOptions.clientConfig, keepAlive: true });
    // Registered before connecting: an unheard 'error' would crash the process.
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    client.on('notification', (msg: Notification) => {
      if (msg.channel === this.options.channel) this.heard(msg.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.options.channel}"`);
    } catch (err) {
      client.end().catch(() => undefined);
      this.options.logger.warn({ err }, 'asynccmd: PostgreSQL LISTEN connection failed; will retry');
      this.scheduleReconnect();
      return;
    }
    if (this.closed || !this.wanted()) {
      await client.end().catch(() => undefined);
      return;
    }
    const recovered = this.failures > 0;
    this.client = client;
    this.failures = 0;
    if (recovered) {
      this.options.logger.info({}, 'asynccmd: PostgreSQL LISTEN connection restored');
      this.wake();
    }
  }

  private lost(client: pg.Client, err?: Error): void {
    if (client !== this.client) return; // a connection being opened or already closed
    this.client = null;
    client.end().catch(() => undefined);
    this.options.logger.warn({ err }, 'asynccmd: PostgreSQL LISTEN connection lost; reconnecting');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || !this.wanted() || this.reconnectTimer !== null) return;
    const { reconnectMinMs, reconnectMaxMs } = this.pgOptions;
    const base = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** this.failures);
    this.failures += 1;
    const delay = base / 2 + (Math.random() * base) / 2;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.client === null) void this.ensureListening();
    }, delay);
    this.reconnectTimer.unref();
  }

  protected async stopListening(): Promise<void> {
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    await this.connecting;
    const client = this.client;
    this.client = null;
    this.failures = 0;
    this.notified = false;
    await this.lent; // a lent statement ends before its connection does
    if (client) await client.end().catch(() => undefined);
  }

  protected override wokenByNotification(): void {
    this.notified = true;
  }
}
