import { InvalidArgumentError } from '@asynccmd/core';

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

const DURATION = /^(?:\d+(?:ms|s|m|h|d|w))+$/;

/** The longest duration accepted: a cutoff further back than that is a mistake, not a policy. */
export const MAX_DURATION_MS = 36_500 * UNIT_MS['d']!;
const PART = /(\d+)(ms|s|m|h|d|w)/g;

/**
 * Parses an operator's duration ("7d", "12h", "1h30m", "500ms") into milliseconds. Strict: a bare
 * number is refused, because "7" could mean days or seconds and a purge must not guess.
 */
export function parseDuration(text: string): number {
  const input = text.trim();
  if (!DURATION.test(input)) {
    throw new InvalidArgumentError(
      `${JSON.stringify(text)} is not a duration (expected e.g. 7d, 12h, 30m, 45s, 500ms or 1h30m)`,
    );
  }
  let total = 0;
  for (const [, amount, unit] of input.matchAll(PART)) {
    total += Number(amount) * (UNIT_MS[unit ?? ''] ?? 0);
  }
  if (total <= 0) throw new InvalidArgumentError(`${JSON.stringify(text)} must be a positive duration`);
  if (!(total <= MAX_DURATION_MS)) {
    throw new InvalidArgumentError(
      `${JSON.stringify(text)} is too long: the longest duration is 36500d (100 years)`,
    );
  }
  return total;
}

const UNITS = [
  ['d', 86_400],
  ['h', 3_600],
  ['m', 60],
  ['s', 1],
] as const;

/** "3d 4h", "12m 5s", "250ms": the age of a backlog, for people. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))}ms`;
  let rest = Math.floor(ms / 1_000);
  const parts: string[] = [];
  // The largest unit and the next one: "3d 4h" says enough; "3d 4h 12m 5s" is noise.
  for (const [unit, size] of UNITS) {
    const n = Math.floor(rest / size);
    rest %= size;
    if (n > 0 || parts.length > 0) parts.push(`${n}${unit}`);
    if (parts.length === 2) break;
  }
  return parts.filter((p) => !p.startsWith('0')).join(' ');
}
