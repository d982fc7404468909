/** Fresh claim tokens: one per claim round, never reused (a UUID, not an instance name: a restarted instance must not match its old claims). */
export interface TokenSource {
  next(): string;
}
