import type { SubmitterSpec } from '../protocol.js';
import { preciseNow } from '../protocol.js';
import { prepareSubmitter, type Submitter } from '../systems/submitters.js';
import { onceMessage, paced, readSpec, runChild, send } from './child.js';

/**
 * Child process: submits commands seq 1..count, each in its own transaction. Paced mode records
 * when each transaction began and when its commit returned (for commit → start latency measured in another process); burst
 * mode times `count` submits spread over concurrent clients (single-submit throughput).
 */
runChild(async () => {
  const spec = readSpec<SubmitterSpec>();
  const go = onceMessage('go');
  const submitter = await prepareSubmitter(spec.system, spec.mode === 'burst' ? spec.clients : 1);
  // Warm-up submits take seqs after the timed ones; their rows stay in the table (counted).
  if (spec.mode === 'burst') await burst(submitter, spec.count + 1, spec.count + spec.warmup, spec.clients);
  await send({ type: 'ready' });
  await go;
  try {
    if (spec.mode === 'paced') {
      const seqs: number[] = [];
      const commits: number[] = [];
      const begins: number[] = [];
      await paced(
        spec.count,
        spec.intervalMs,
        async (seq) => {
          const began = preciseNow();
          await submitter.submit({ seq });
          commits.push(preciseNow());
          begins.push(began);
          seqs.push(seq);
        },
        spec.lastGapMs,
      );
      await send({ type: 'commits', seqs, commits, begins });
    } else {
      const t0 = performance.now();
      await burst(submitter, 1, spec.count, spec.clients);
      await send({ type: 'burst', count: spec.count, elapsedMs: performance.now() - t0 });
    }
  } finally {
    await submitter.close();
  }
});

/** Submits seq `from`..`to` from `clients` concurrent clients, each one transaction per submit. */
async function burst(submitter: Submitter, from: number, to: number, clients: number): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next <= to) {
        const seq = next++;
        await submitter.submit({ seq });
      }
    }),
  );
}
