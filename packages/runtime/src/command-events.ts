import type { CommandEvent, CommandEventKind, CommandEventListener, Logger } from '@asynccmd/core';

type EventOf<K extends CommandEventKind> = Extract<CommandEvent, { kind: K }>;

/** Fan-out of CommandEvents to subscribers (metrics, logs, tracing). A throwing listener is logged, never fatal. */
export class CommandEvents {
  readonly #listeners = new Set<CommandEventListener>();
  /** Listeners of one kind each: the hot path builds a kind's events only if someone takes them. */
  readonly #kindListeners = new Map<CommandEventKind, Set<CommandEventListener>>();

  constructor(private readonly logger: Logger) {}

  /** Subscribes to every event; returns the unsubscribe function. */
  on(listener: CommandEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Subscribes to one kind of event. */
  onKind<K extends CommandEventKind>(kind: K, listener: (event: EventOf<K>) => void): () => void {
    let listeners = this.#kindListeners.get(kind);
    if (listeners === undefined) this.#kindListeners.set(kind, (listeners = new Set()));
    const wrapped = listener as CommandEventListener;
    listeners.add(wrapped);
    return () => {
      listeners.delete(wrapped);
      if (listeners.size === 0 && this.#kindListeners.get(kind) === listeners)
        this.#kindListeners.delete(kind);
    };
  }

  /** Whether anyone listens to any event. */
  get listening(): boolean {
    return this.#listeners.size > 0 || this.#kindListeners.size > 0;
  }

  /** Whether anyone listens to `kind`: hot paths skip building events nobody would see. */
  listensTo(kind: CommandEventKind): boolean {
    return this.#listeners.size > 0 || this.#kindListeners.has(kind);
  }

  emit(event: CommandEvent): void {
    for (const listener of this.#listeners) this.#deliver(listener, event);
    const ofKind = this.#kindListeners.get(event.kind);
    if (ofKind !== undefined) for (const listener of ofKind) this.#deliver(listener, event);
  }

  #deliver(listener: CommandEventListener, event: CommandEvent): void {
    try {
      listener(event);
    } catch (error) {
      this.logger.error({ err: error, event: event.kind }, 'asynccmd event listener threw');
    }
  }
}
