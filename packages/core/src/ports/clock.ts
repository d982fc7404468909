/** The application's clock: due times (`runAt`, retry backoff) are judged on it, as the seed says. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
