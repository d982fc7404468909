import type { SubmitterSpec } from '../protocol.js';
import { preciseNow } from '../protocol.js';
import { prepareSubmitter } from '../systems/submitters.js';
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
  await send({ type: 'ready' });
  await go;
  try {
    if (spec.mode === 'paced') {
      const seqs: number[] = [];
      const commits: number[] = [];
      const begins: number[] = [];
      await paced(spec.count, spec.intervalMs, async (seq) => {
        const began = preciseNow();
        await submitter.submit({ seq });
        commits.push(preciseNow());
        begins.push(began);
        seqs.push(seq);
      });
      await send({ type: 'commits', seqs, commits, begins });
    } else {
      let next = 1;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: spec.clients }, async () => {
          while (next <= spec.count) {
            const seq = next++;
            await submitter.submit({ seq });
          }
        }),
      );
      await send({ type: 'burst', count: spec.count, elapsedMs: performance.now() - t0 });
    }
  } finally {
    await submitter.close();
  }
});
