import type { FromChild, ToChild } from '../protocol.js';

/** The child side of the protocol: the spec from argv, messages to the orchestrator, go/stop. */
export function readSpec<T>(): T {
  const raw = process.argv[2];
  if (!raw) throw new Error('worker started without a spec argument');
  return JSON.parse(raw) as T;
}

export function send(message: FromChild): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}

/** Resolves when the orchestrator sends this message type. */
export function onceMessage(type: ToChild['type']): Promise<void> {
  return new Promise((resolve) => {
    const listener = (m: ToChild): void => {
      if (m.type === type) {
        process.off('message', listener);
        resolve();
      }
    };
    process.on('message', listener);
  });
}

/**
 * Runs a worker body; any failure is reported to the orchestrator before the child exits non-zero,
 * and losing the orchestrator (it crashed) ends the child too, so no process is ever left behind.
 */
export function runChild(body: () => Promise<void>): void {
  process.on('disconnect', () => process.exit(0));
  const fail = async (err: unknown): Promise<void> => {
    await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    process.exit(1);
  };
  // A consumer loop failing in the background is reported at once, not at the next stop.
  process.on('unhandledRejection', (err) => void fail(err));
  body().then(() => {
    process.disconnect?.();
    process.exit(0);
  }, fail);
}

/**
 * Calls `fn(seq)` for seq 1..count, starting call i at i × intervalMs (a slow call does not shift
 * the rest) — the last one, given `lastGapMs`, that long after the one before it started.
 */
export async function paced(
  count: number,
  intervalMs: number,
  fn: (seq: number) => Promise<void>,
  lastGapMs?: number,
): Promise<void> {
  const t0 = performance.now();
  let started = t0;
  for (let seq = 1; seq <= count; seq++) {
    const at =
      seq === count && seq > 1 && lastGapMs !== undefined ? started + lastGapMs : t0 + (seq - 1) * intervalMs;
    const wait = at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    started = performance.now();
    await fn(seq);
  }
}
