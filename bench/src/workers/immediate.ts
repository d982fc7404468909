import type { BenchPayload, SubmitterSpec } from '../protocol.js';
import { BENCH_TYPE, preciseNow } from '../protocol.js';
import { benchRuntime, openStore } from '../systems/asynccmd.js';
import { onceMessage, paced, readSpec, runChild, send } from './child.js';

/**
 * Child process: asynccmd in IMMEDIATE mode, submitter and executor in the same process. Each
 * command is submitted in its own `client.transaction`; its commit time is taken from the client's
 * `submitted` event (emitted once the COMMIT round trip is back, before the after-commit dispatch),
 * its start time in the executor. The moment the transaction began is reported too: on PostgreSQL
 * the claim rides in the COMMIT's round trip, so begin → start shows what that changes end to end.
 */
runChild(async () => {
  const spec = readSpec<SubmitterSpec>();
  if (
    spec.mode !== 'paced' ||
    (spec.system.kind !== 'asynccmd-pg' && spec.system.kind !== 'asynccmd-mysql')
  ) {
    throw new Error('the immediate worker runs paced asynccmd submits only');
  }
  const go = onceMessage('go');
  const seqs: number[] = [];
  const starts: number[] = [];
  const onExecute = (payload: BenchPayload): void => {
    starts.push(preciseNow());
    seqs.push(payload.seq);
  };
  const runtime = benchRuntime(
    await openStore(spec.system, 4),
    { concurrency: 10 },
    { mode: 'IMMEDIATE', onExecute },
  );
  let committedAt = Number.NaN;
  runtime.on((event) => {
    if (event.kind === 'submitted') committedAt = preciseNow();
  });
  runtime.start();
  await send({ type: 'ready' });
  await go;
  const commitSeqs: number[] = [];
  const commits: number[] = [];
  const begins: number[] = [];
  await paced(spec.count, spec.intervalMs, async (seq) => {
    const began = preciseNow();
    await runtime.client.transaction((_tx, submit) => submit(BENCH_TYPE, { seq }));
    commitSeqs.push(seq);
    commits.push(committedAt);
    begins.push(began);
  });
  const deadline = performance.now() + 30_000;
  while (seqs.length < spec.count && performance.now() < deadline)
    await new Promise((r) => setTimeout(r, 10));
  await runtime.stop();
  await send({ type: 'commits', seqs: commitSeqs, commits, begins });
  await send({ type: 'executions', seqs, starts });
});
