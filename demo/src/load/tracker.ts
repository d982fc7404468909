import type { OperationStateName, OperationView } from '../domain/operation-view.js';

/** Reads the current views of many operations (missing ones are left out). */
export type ReadOperations = (operationIds: readonly string[]) => Promise<OperationView[]>;

export interface TrackedOperation {
  readonly operationId: string;
  /** When the server committed the order (from the view; the client's clock until the first read). */
  acceptedAt: number;
  state: OperationStateName | 'unknown';
  terminalAt: number | null;
  /** Failed attempts over all its commands. */
  retries: number;
  deadCommands: number;
}

/**
 * Follows accepted operations to their terminal state by reading the operation view (one
 * definition of "terminal" for the API, the summary and the experiment), and samples the age of
 * the work still pending at every tick.
 */
export class OperationTracker {
  readonly operations = new Map<string, TrackedOperation>();
  /** Age of each unfinished operation at each tick (ms). */
  readonly pendingAges: number[] = [];
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;

  constructor(
    private readonly read: ReadOperations,
    private readonly intervalMs = 200,
  ) {}

  add(operationId: string, acceptedAt = Date.now()): void {
    if (!this.operations.has(operationId)) {
      this.operations.set(operationId, {
        operationId,
        acceptedAt,
        state: 'unknown',
        terminalAt: null,
        retries: 0,
        deadCommands: 0,
      });
    }
  }

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), this.intervalMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  unfinished(): TrackedOperation[] {
    return [...this.operations.values()].filter((o) => o.terminalAt === null);
  }

  /** Reads every unfinished operation once. Ticks never overlap. */
  tick(): Promise<void> {
    // A failed read (e.g. the service shutting down under Ctrl-C) just leaves the states as they were.
    this.ticking ??= this.readAll()
      .catch(() => undefined)
      .finally(() => {
        this.ticking = null;
      });
    return this.ticking;
  }

  private async readAll(): Promise<void> {
    const now = Date.now();
    const unfinished = this.unfinished();
    if (unfinished.length === 0) return;
    const views = new Map(
      (await this.read(unfinished.map((o) => o.operationId))).map((v) => [v.operationId, v]),
    );
    for (const op of unfinished) {
      const view = views.get(op.operationId);
      if (!view) continue;
      op.state = view.state;
      op.retries = view.commands.reduce((n, c) => n + c.failedAttempts, 0);
      op.deadCommands = view.commands.filter((c) => c.status === 'DEAD').length;
      // acceptedAt of the server (when the order committed), not of the client's answer.
      op.acceptedAt = Date.parse(view.acceptedAt);
      if (view.terminal && view.terminalAt) op.terminalAt = Date.parse(view.terminalAt);
      else this.pendingAges.push(now - op.acceptedAt);
    }
  }

  /** Resolves true once every operation is terminal, false if `timeoutMs` passes first. */
  async waitAll(timeoutMs: number, onTick?: () => void): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      await this.tick();
      onTick?.();
      if (this.unfinished().length === 0) return true;
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, this.intervalMs));
    }
  }

  acceptToTerminalMs(): number[] {
    return [...this.operations.values()].flatMap((o) =>
      o.terminalAt === null ? [] : [Math.max(0, o.terminalAt - o.acceptedAt)],
    );
  }

  countByState(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const o of this.operations.values()) counts[o.state] = (counts[o.state] ?? 0) + 1;
    return counts;
  }
}
