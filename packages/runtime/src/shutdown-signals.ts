import type { Logger } from '@asynccmd/core';
import type { StopOptions } from './options.js';

export interface ShutdownSignalOptions extends StopOptions {
  readonly signals?: readonly NodeJS.Signals[];
  readonly logger?: Logger;
  /** Called after the graceful stop (code 0) or on the second signal (code 1). Default: process.exit. */
  readonly exit?: (code: number) => void;
}

/**
 * First SIGINT/SIGTERM: graceful `stop()`, then exit 0. A second signal while stopping: exit 1 at
 * once (the leases of whatever still runs expire and other instances take the commands back).
 * Returns a function that removes the handlers.
 */
export function installShutdownHandlers(
  runtime: { stop(options?: StopOptions): Promise<void> },
  options: ShutdownSignalOptions = {},
): () => void {
  const {
    signals = ['SIGINT', 'SIGTERM'],
    logger,
    exit = (code: number) => process.exit(code),
    ...stop
  } = options;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger?.warn({ signal }, 'asynccmd: second signal; exiting without waiting');
      exit(1);
      return;
    }
    stopping = true;
    logger?.info({ signal }, 'asynccmd: shutting down gracefully (send the signal again to abort)');
    runtime.stop(stop).then(
      () => exit(0),
      (error: unknown) => {
        logger?.error({ err: error }, 'asynccmd: shutdown failed');
        exit(1);
      },
    );
  };
  for (const s of signals) process.on(s, onSignal);
  return () => {
    for (const s of signals) process.off(s, onSignal);
  };
}
