/** The application's clock: due times (`runAt`, retry backoff) are judged on it; leases are not (they use the database clock). */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
