import { AsyncCommands } from './async-commands.js';
import type { AnyExecutor, PayloadMapOf } from './executor.js';
import type { AsyncCommandsOptions } from './options.js';

/**
 * The plain factory, for applications without a DI container. The client's payload types are
 * inferred from the executors: `client.submit(tx, 'order.notify', { … })` is checked.
 */
export function createAsyncCommands<const E extends readonly AnyExecutor[], Tx = unknown>(
  options: AsyncCommandsOptions<Tx> & { readonly executors: E },
): AsyncCommands<PayloadMapOf<E[number]>, Tx> {
  return new AsyncCommands<PayloadMapOf<E[number]>, Tx>(options);
}
