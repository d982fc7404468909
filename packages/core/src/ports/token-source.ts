/** Fresh claim tokens: one per claim round, never reused (seed §3: a UUID, not an instance name). */
export interface TokenSource {
  next(): string;
}
