import type { Logger } from '@asynccmd/core';
import { NotifyWakeups } from '@asynccmd/adapter-postgres/engine';
import type { PGliteInterface } from '@electric-sql/pglite';

/**
 * Wake-ups over PGlite's LISTEN/NOTIFY: its notifications reach the listeners of the same database
 * in this process (the stores on it), never another process. A NOTIFY, like a statement, waits for
 * an open transaction of the database to end.
 */
export class PgliteWakeups extends NotifyWakeups {
  #unlisten: Promise<() => Promise<void>> | null = null;

  constructor(
    private readonly db: PGliteInterface,
    options: { readonly channel: string; readonly windowMs: number; readonly logger: Logger },
  ) {
    super({
      ...options,
      send: (channel, payload) => db.query('SELECT pg_notify($1, $2)', [channel, payload]),
    });
  }

  get delivers(): boolean {
    return true;
  }

  protected async startListening(): Promise<void> {
    this.#unlisten ??= this.db.listen(`"${this.options.channel}"`, (payload) => this.heard(payload));
    try {
      await this.#unlisten;
    } catch (error) {
      this.#unlisten = null;
      throw error;
    }
  }

  protected async stopListening(): Promise<void> {
    const listening = this.#unlisten;
    this.#unlisten = null;
    if (listening === null || this.db.closed) return;
    try {
      await (
        await listening
      )();
    } catch (err) {
      // The database closed meanwhile: nothing is heard any more either way.
      this.options.logger.debug({ err }, 'asynccmd: PGlite UNLISTEN failed');
    }
  }
}
