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
  body().then(
    () => {
      process.disconnect?.();
      process.exit(0);
    },
    async (err: unknown) => {
      await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      process.exit(1);
    },
  );
}
