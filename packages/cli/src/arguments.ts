import { CliFailure, EXIT_USAGE } from './failures.js';

/** A whole number from 1 to `max` given to `option`, or a usage error naming the option. */
export function parseCount(option: string, text: string, max: number, min = 1): number {
  const n = /^\s*\d{1,7}\s*$/.test(text) ? Number(text) : NaN;
  if (!(n >= min && n <= max)) {
    throw new CliFailure(
      `${option} must be a whole number from ${min} to ${max}, not ${JSON.stringify(text.slice(0, 40))}`,
      EXIT_USAGE,
    );
  }
  return n;
}
