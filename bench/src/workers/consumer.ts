import type { BenchPayload, ConsumerSpec } from '../protocol.js';
import { preciseNow } from '../protocol.js';
import { prepareConsumer } from '../systems/consumers.js';
import { onceMessage, readSpec, runChild, send } from './child.js';

/**
 * The seqs run, four bytes each: a million-command drain must not count a JS array of a million
 * numbers (and its copies as it grows) into the consumer's peak RSS.
 */
class SeqLog {
  #values = new Int32Array(1024);
  length = 0;

  push(seq: number): void {
    if (this.length === this.#values.length) {
      const grown = new Int32Array(this.#values.length * 2);
      grown.set(this.#values);
      this.#values = grown;
    }
    this.#values[this.length++] = seq;
  }

  toArray(): number[] {
    return Array.from(this.#values.subarray(0, this.length));
  }
}

/** How often progress is reported: a drain's window opens at a report, so it is this precise. */
const PROGRESS_MS = 2;

/**
 * Child process: runs one queue consumer with a no-op executor that only records which command
 * ran (and when), reporting progress while it runs and every execution when stopped. The
 * orchestrator checks the executions against the database, so a double run cannot hide.
 */
runChild(async () => {
  const spec = readSpec<ConsumerSpec>();
  const seqs = new SeqLog();
  const starts: number[] = [];
  const onExecute = (payload: BenchPayload): void => {
    if (spec.recordStarts) starts.push(preciseNow());
    seqs.push(payload.seq);
  };
  const go = onceMessage('go');
  const stop = onceMessage('stop');
  const consumer = await prepareConsumer(spec, onExecute);
  await send({ type: 'ready' });
  await go;
  const cpuAtGo = process.cpuUsage();
  await consumer.go();
  let reported = -1;
  const progress = setInterval(() => {
    if (seqs.length !== reported) {
      reported = seqs.length;
      const cpu = process.cpuUsage(cpuAtGo);
      void send({ type: 'progress', executed: reported, at: preciseNow(), cpuMicros: cpu.user + cpu.system });
    }
  }, PROGRESS_MS);
  await stop;
  clearInterval(progress);
  await consumer.stop();
  // This process's CPU (user + system) and peak memory: what a consumer costs on a shared machine.
  const cpu = process.cpuUsage(cpuAtGo);
  const cpuMicros = cpu.user + cpu.system;
  const peakRssKb = process.resourceUsage().maxRSS;
  await send({
    type: 'executions',
    seqs: seqs.toArray(),
    starts,
    cpuMicros,
    peakRssKb,
    ...(consumer.diagnostics ? { diagnostics: consumer.diagnostics() } : {}),
  });
});
