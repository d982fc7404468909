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

/**
 * `--weight KEY=W` values as a weighted fair share's weights (the last `=` splits key from weight);
 * a key given twice keeps its last weight. Refused (exit 2) when one has no `=` or a bad weight.
 */
export function parseWeights(values: readonly string[], max: number): Record<string, number> {
  const weights: Record<string, number> = {};
  for (const value of values) {
    const at = value.lastIndexOf('=');
    if (at <= 0) {
      throw new CliFailure(
        `--weight takes KEY=WEIGHT, not ${JSON.stringify(value.slice(0, 40))}`,
        EXIT_USAGE,
      );
    }
    weights[value.slice(0, at)] = parseCount('--weight', value.slice(at + 1), max);
  }
  return weights;
}
