import { parseArgs } from 'node:util';
import { runLatency, type LatencyTarget } from './latency.js';
import { dropSchema, pgPool } from './pg.js';
import type { SystemSpec } from './protocol.js';
import { freshCommandTable } from './scenarios/pg-targets.js';
import { percentile } from './stats.js';

/**
 * Diagnostic, not part of `npm run bench`: many short rounds of the PostgreSQL commit → start
 * latency run (consumer with asynccmd's defaults, paced submitter in another process), counting
 * the samples that took `--slow` ms or more and where in their round they fell. A wake-up that
 * never reaches the consumer shows as a sample near the poll interval (1 s by default) — at the
 * end of a round, where no later submit's wake-up picks the command up. Runs on a schema of its
 * own, so it does not touch the bench's. `--last-gap 2` starts each round's last submit 2 ms after
 * the one before it (a submitter catching up just before it stops): that submit's wake-up is then
 * folded into the NOTIFY window opened by the one before.
 *
 *   node bench/dist/wake-probe.js --rounds 40 --samples 100 --interval 10 [--last-gap 2]
 */
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    samples: { type: 'string', default: '100' },
    interval: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '10' },
    slow: { type: 'string', default: '100' },
    schema: { type: 'string', default: 'bench_wake_probe' },
    'last-gap': { type: 'string' },
  },
});
const rounds = Number(values.rounds);
const samples = Number(values.samples);
const intervalMs = Number(values.interval);
const warmup = Number(values.warmup);
const slowMs = Number(values.slow);
const schema = values.schema;
const lastGapMs = values['last-gap'] === undefined ? undefined : Number(values['last-gap']);

const pool = pgPool(2);
const system: SystemSpec = { kind: 'asynccmd-pg', schema };
const target: LatencyTarget = {
  system: 'asynccmd (coalesced NOTIFY)',
  prepare: () => freshCommandTable(pool, schema),
  consumer: { system, concurrency: 10, recordStarts: true },
  submitter: system,
  ...(lastGapMs === undefined ? {} : { lastGapMs }),
};

const all: number[] = [];
const slow: { round: number; index: number; ms: number }[] = [];
try {
  for (let r = 0; r < rounds; r++) {
    const taken = (await runLatency(target, samples, intervalMs, warmup, 120_000)).fromCommit.samples;
    taken.forEach((ms, index) => {
      all.push(ms);
      if (ms >= slowMs) slow.push({ round: r, index, ms });
    });
    console.log(
      `round ${r + 1}/${rounds}: max ${Math.max(...taken).toFixed(2)} ms, last ${taken.at(-1)!.toFixed(2)} ms`,
    );
  }
} finally {
  await dropSchema(pool, schema).catch(() => undefined);
  await pool.end();
}

const last = slow.filter((s) => s.index === samples - 1).length;
console.log(
  `${all.length} samples (${rounds} rounds × ${samples}, one submit every ${intervalMs} ms` +
    `${lastGapMs === undefined ? '' : `, the last ${lastGapMs} ms after the one before`}): ` +
    `p50 ${percentile(all, 50).toFixed(2)} ms, p99 ${percentile(all, 99).toFixed(2)} ms, ` +
    `max ${Math.max(...all).toFixed(2)} ms; ${slow.length} ≥ ${slowMs} ms, ${last} of them a round's last`,
);
for (const s of slow) {
  console.log(`  round ${s.round + 1}, sample ${s.index + 1}/${samples}: ${s.ms.toFixed(1)} ms`);
}
