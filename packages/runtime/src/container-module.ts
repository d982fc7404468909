import 'reflect-metadata';
import { ContainerModule, type Newable } from 'inversify';
import {
  silentLogger,
  systemClock,
  type Clock,
  type CommandStore,
  type Logger,
  type TokenSource,
} from '@asynccmd/core';
import { AsyncCommands, uuidTokenSource } from './async-commands.js';
import type { AnyExecutor } from './executor.js';
import type { AsyncCommandsOptions } from './options.js';
import { validateOptions } from './options-validation.js';

/** Service identifiers asynccmd binds (and reads: bind Store, Clock, TokenSource, Logger yourself to override). */
export const AsyncCommandTokens = {
  Store: Symbol.for('asynccmd.Store'),
  Clock: Symbol.for('asynccmd.Clock'),
  TokenSource: Symbol.for('asynccmd.TokenSource'),
  Logger: Symbol.for('asynccmd.Logger'),
  /** Multi-bound: every executor the module registers. */
  Executor: Symbol.for('asynccmd.Executor'),
  /** The AsyncCommands instance (start/stop/state/on). */
  Runtime: Symbol.for('asynccmd.Runtime'),
  Client: Symbol.for('asynccmd.Client'),
  Registry: Symbol.for('asynccmd.Registry'),
  Events: Symbol.for('asynccmd.Events'),
} as const;

export interface AsyncCommandModuleOptions<Tx = unknown> extends Omit<
  AsyncCommandsOptions<Tx>,
  'store' | 'executors'
> {
  /** The store; leave out to bind `AsyncCommandTokens.Store` yourself. */
  readonly store?: CommandStore<Tx>;
  /** Executor classes (`@injectable()`, resolved by the container with their dependencies) or objects. */
  readonly executors?: readonly (Newable<AnyExecutor> | AnyExecutor)[];
}

/**
 * Binds asynccmd into an inversify container: store, clock, token source, logger, executors, and
 * the runtime with its client, registry and events (all singletons of this container).
 */
export function asyncCommandModule<Tx = unknown>(
  options: AsyncCommandModuleOptions<Tx> = {},
): ContainerModule {
  validateOptions(options, true);
  const { store, executors = [], clock, tokens, logger, ...rest } = options;
  const T = AsyncCommandTokens;
  return new ContainerModule(({ bind, isBound }) => {
    if (store) bind<CommandStore<Tx>>(T.Store).toConstantValue(store);
    if (clock || !isBound(T.Clock)) bind<Clock>(T.Clock).toConstantValue(clock ?? systemClock);
    if (tokens || !isBound(T.TokenSource))
      bind<TokenSource>(T.TokenSource).toConstantValue(tokens ?? uuidTokenSource);
    if (logger || !isBound(T.Logger)) bind<Logger>(T.Logger).toConstantValue(logger ?? silentLogger);
    for (const executor of executors) {
      if (typeof executor === 'function') {
        bind(executor).toSelf().inSingletonScope();
        bind<AnyExecutor>(T.Executor).toService(executor);
      } else {
        bind<AnyExecutor>(T.Executor).toConstantValue(executor);
      }
    }
    bind<AsyncCommands<never, Tx>>(T.Runtime)
      .toDynamicValue(
        (ctx) =>
          new AsyncCommands<never, Tx>({
            ...rest,
            store: ctx.get<CommandStore<Tx>>(T.Store),
            clock: ctx.get<Clock>(T.Clock),
            tokens: ctx.get<TokenSource>(T.TokenSource),
            logger: ctx.get<Logger>(T.Logger),
            executors: ctx.getAll<AnyExecutor>(T.Executor, { optional: true }),
          }),
      )
      .inSingletonScope();
    const part = <K extends 'client' | 'registry' | 'events'>(id: symbol, key: K) =>
      bind(id)
        .toDynamicValue((ctx) => ctx.get<AsyncCommands<never, Tx>>(T.Runtime)[key])
        .inSingletonScope();
    part(T.Client, 'client');
    part(T.Registry, 'registry');
    part(T.Events, 'events');
  });
}
