/**
 * The cadence of a polled wake-up probe (stores without a notification channel look for other
 * processes' commits this way): every SHORTEST ms while the table keeps changing, then slower the
 * longer it stays quiet, never slower than LONGEST. The wait is a tenth of the quiet time so far, so
 * work arriving after a quiet spell waits at most about a tenth of that spell: at a steady stream
 * of submits it waits at most SHORTEST, and an idle instance probes LONGEST⁻¹ times a second.
 */
export const WAKE_PROBE_SHORTEST_MS = 5;
export const WAKE_PROBE_LONGEST_MS = 100;

/** Milliseconds until the next probe, `quietMs` after the probe last saw a change. */
export function wakeProbeDelayMs(quietMs: number): number {
  const delay = Number.isFinite(quietMs) ? quietMs / 10 : WAKE_PROBE_LONGEST_MS;
  return Math.min(WAKE_PROBE_LONGEST_MS, Math.max(WAKE_PROBE_SHORTEST_MS, Math.round(delay)));
}
