import { InvalidArgumentError, type PoolCapacity } from '@asynccmd/core';
import { AdaptiveQueue } from './adaptive-queue.js';
import { poolOptionsProblem } from './options-validation.js';

export interface PoolOptions {
  /** Commands running at once. */
  readonly concurrency: number;
  /**
   * Claimed commands allowed to wait for a slot. Default: adaptive — as many as the slots would
   * start during about two claim round trips, from the measured execution and claim times (core
   * adaptiveQueueSize, at most 500): fast commands on a deep backlog come in large claims, slow
   * ones are claimed only as slots free up, so no instance holds work others could start. Queued
   * commands keep their lease (heartbeats) and go back to PENDING on shutdown. A number fixes it
   * (0: claim only what can start now).
   */
  readonly queueSize?: number;
  /**
   * Free places (idle slots plus queue room) that make a claim round worth it while the pool is
   * still busy with a backlog. Default: half of `concurrency + queueSize` (the current adaptive
   * size if it adapts), rounded up — claims then
   * come in useful batches instead of one round per freed slot. A local submit, a store wake-up and
   * the poll interval still claim whatever is free, so latency does not wait for the threshold.
   */
  readonly refillAt?: number;
  /**
   * Longest a free place waits for `refillAt` places to gather before the scheduler refills what
   * is free anyway (the other slots may hold long-running commands). Default 20 ms.
   */
  readonly refillWaitMs?: number;
  /**
   * The pool's command types take turns: each claim round shares the pool's free places among its
   * types, one claim per type (then those that came back full share what the others left), the
   * first turn going to the next type each round. One type's backlog then never keeps the pool's other
   * types waiting, and priorities order commands within a type only. Default false: a round claims
   * the first due commands of all the pool's types in one claim (priority, due time, id).
   */
  readonly typeTurns?: boolean;
}

export const DEFAULT_REFILL_WAIT_MS = 20;

/**
 * What a job's run leaves behind once its slot is free: the write of its outcome, which needs a
 * database round trip but no slot. The pool counts it until it settles (see `free`).
 */
export interface PoolJobTail {
  readonly recorded: Promise<void>;
  /**
   * How long each command the job ran took, where it ran several one after another in its slot
   * (attempts sharing a transaction, whose COMMIT is shared too): what the adaptive queue counts
   * instead of the job's whole time.
   */
  readonly durations?: readonly number[];
  /** The most commands the job could have run in its slot (its transaction's limit); default 1. */
  readonly upTo?: number;
  /** For how long after its start the job could take further commands (`transactionGroupMs`). */
  readonly withinMs?: number;
}

/** A unit of pool work; it must not reject (the command runner catches everything). */
export interface PoolJob {
  /** Resolves when the slot can take other work, with the job's tail if it has one. */
  run(): Promise<void | PoolJobTail>;
}

export interface PoolState {
  readonly name: string;
  readonly concurrency: number;
  /** The queue's size now (it changes when it adapts). */
  readonly queueSize: number;
  /** The queue size adapts to the measured execution and claim times (no fixed `queueSize`). */
  readonly adaptiveQueue: boolean;
  /** The pool's types take turns in each claim round (PoolOptions.typeTurns). */
  readonly typeTurns: boolean;
  readonly refillAt: number;
  readonly active: number;
  readonly queued: number;
  /** Jobs done with their slot whose outcome is still being written. */
  readonly recording: number;
  readonly free: number;
}

/** A bounded pool of concurrent async work with a bounded queue; `offer` refuses when both are full. */
export class WorkPool {
  readonly concurrency: number;
  readonly refillWaitMs: number;
  /** The pool's types take turns in each claim round (PoolOptions.typeTurns). */
  readonly typeTurns: boolean;
  /** The queue adapts (no fixed `queueSize`). */
  readonly adaptiveQueue: boolean;
  readonly #refillAt: number | undefined;
  /** The queue's size when fixed; null when it adapts (#adaptive). */
  readonly #fixedQueueSize: number | null;
  readonly #adaptive: AdaptiveQueue | null;
  #active = 0;
  #recording = 0;
  readonly #queue: PoolJob[] = [];
  #idle: (() => void)[] = [];

  constructor(
    readonly name: string,
    options: PoolOptions,
    private readonly onSlotFree: (pool: WorkPool) => void = () => undefined,
  ) {
    const problem = poolOptionsProblem(options);
    if (problem) throw new InvalidArgumentError(`pool "${name}": ${problem}`);
    this.concurrency = options.concurrency;
    this.adaptiveQueue = options.queueSize === undefined;
    this.#fixedQueueSize = options.queueSize ?? null;
    this.#adaptive = this.adaptiveQueue ? new AdaptiveQueue(this.concurrency) : null;
    this.#refillAt = options.refillAt;
    this.refillWaitMs = options.refillWaitMs ?? DEFAULT_REFILL_WAIT_MS;
    this.typeTurns = options.typeTurns ?? false;
  }

  /** Claimed commands allowed to wait for a slot, now. */
  get queueSize(): number {
    return this.#fixedQueueSize ?? this.#adaptive?.size ?? 0;
  }

  /** Free places that make a refill round worth it; never more than the pool has places. */
  get refillAt(): number {
    const places = this.concurrency + this.queueSize;
    return Math.min(this.#refillAt ?? Math.ceil(places / 2), places);
  }

  /** A claim for this pool took `ms`: an adaptive queue follows the claim round trip. */
  claimTook(ms: number): void {
    this.#adaptive?.claimTook(ms);
  }

  /**
   * Places for claimed work now: idle slots plus queue room. A slot frees when its command has
   * run, so the next claim overlaps the write of the last outcomes; but once more outcomes are
   * being written than the pool runs at once (a slow or failing store), the excess holds slots,
   * and beyond a whole pool's worth (slots and queue) it holds queue room too: unrecorded commands
   * stay bounded by about one claim beyond the places, however fast commands run.
   */
  get free(): number {
    const unwritten = this.#recording - this.concurrency;
    const held = this.#active + Math.max(0, unwritten);
    const queueSize = this.queueSize;
    const queueHeld = this.#queue.length + Math.max(0, unwritten - queueSize);
    return Math.max(0, this.concurrency - held) + Math.max(0, queueSize - queueHeld);
  }

  capacity(): PoolCapacity {
    return { free: this.free };
  }

  /** Starts or queues `job`; false when the pool and its queue are full (the caller runs it then). */
  offer(job: PoolJob): boolean {
    if (this.#active < this.concurrency) {
      this.#start(job);
      return true;
    }
    if (this.#queue.length < this.queueSize) {
      this.#queue.push(job);
      return true;
    }
    return false;
  }

  /**
   * Starts or queues `job`, which was claimed for places this pool had when the claim was sized:
   * it is queued even if those places have shrunk since (an adaptive queue resized, outcome writes
   * came to hold slots, a local submit took a slot), so the claim's round does not run it itself.
   * The next claim is sized from what is free then, so the queue stays bounded by one claim.
   */
  admit(job: PoolJob): void {
    if (this.#active < this.concurrency) this.#start(job);
    else this.#queue.push(job);
  }

  /** Takes `job` out of the queue if it has not started; true when it was removed. */
  remove(job: PoolJob): boolean {
    const i = this.#queue.indexOf(job);
    if (i < 0) return false;
    this.#queue.splice(i, 1);
    return true;
  }

  /**
   * Takes the first queued job `fits` accepts out of the queue, for a running job to run it in
   * its own slot (transactional attempts that share a transaction); null when none does.
   */
  take<T extends PoolJob>(fits: (job: PoolJob) => job is T): T | null {
    const i = this.#queue.findIndex(fits);
    if (i < 0) return null;
    const [job] = this.#queue.splice(i, 1);
    return (job as T | undefined) ?? null;
  }

  /** Empties the queue (shutdown): the returned jobs never start. */
  drainQueue(): PoolJob[] {
    return this.#queue.splice(0);
  }

  /** Resolves once nothing runs, nothing waits and every outcome is written. */
  whenIdle(): Promise<void> {
    if (this.#idleNow()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  state(): PoolState {
    return {
      name: this.name,
      concurrency: this.concurrency,
      queueSize: this.queueSize,
      adaptiveQueue: this.adaptiveQueue,
      typeTurns: this.typeTurns,
      refillAt: this.refillAt,
      active: this.#active,
      queued: this.#queue.length,
      recording: this.#recording,
      free: this.free,
    };
  }

  #idleNow(): boolean {
    return this.#active === 0 && this.#recording === 0 && this.#queue.length === 0;
  }

  #start(job: PoolJob): void {
    this.#active++;
    const adaptive = this.#adaptive;
    const began = adaptive ? performance.now() : 0;
    const done = (tail: void | PoolJobTail): void => {
      this.#active--;
      if (adaptive) {
        if (tail?.durations === undefined) adaptive.executionTook(performance.now() - began);
        else for (const ms of tail.durations) adaptive.executionTook(ms);
        adaptive.sharedUpTo(tail?.upTo ?? 1, tail?.withinMs);
      }
      if (tail) {
        this.#recording++;
        const recorded = (): void => {
          this.#recording--;
          this.#settled();
        };
        tail.recorded.then(recorded, recorded);
      }
      const next = this.#queue.shift();
      if (next) this.#start(next);
      this.#settled();
    };
    // A job must not reject; if one does anyway, the pool must still free its slot.
    job.run().then(done, () => done());
  }

  /** A slot or an outcome write came free. */
  #settled(): void {
    if (this.#idle.length > 0 && this.#idleNow()) {
      const idle = this.#idle;
      this.#idle = [];
      for (const resolve of idle) resolve();
    }
    this.onSlotFree(this);
  }
}
