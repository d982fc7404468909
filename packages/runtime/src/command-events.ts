import type { CommandEvent, CommandEventKind, CommandEventListener, Logger } from '@asynccmd/core';

type EventOf<K extends CommandEventKind> = Extract<CommandEvent, { kind: K }>;

/** Fan-out of CommandEvents to subscribers (metrics, logs, tracing). A throwing listener is logged, never fatal. */
export class CommandEvents {
  readonly #listeners = new Set<CommandEventListener>();

  constructor(private readonly logger: Logger) {}

  /** Subscribes to every event; returns the unsubscribe function. */
  on(listener: CommandEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Subscribes to one kind of event. */
  onKind<K extends CommandEventKind>(kind: K, listener: (event: EventOf<K>) => void): () => void {
    return this.on((e) => {
      if (e.kind === kind) listener(e as EventOf<K>);
    });
  }

  /** Whether anyone listens: hot paths skip building events nobody would see. */
  get listening(): boolean {
    return this.#listeners.size > 0;
  }

  emit(event: CommandEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.error({ err: error, event: event.kind }, 'asynccmd event listener threw');
      }
    }
  }
}
