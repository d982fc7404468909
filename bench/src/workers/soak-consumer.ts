import type { BenchPayload, ConsumerSpec } from '../protocol.js';
import { preciseNow } from '../protocol.js';
import { record, type Histogram } from '../soak/windows.js';
import { prepareConsumer } from '../systems/consumers.js';
import { runChild, readSpec, send } from './child.js';

/**
 * Child process of the soak: one queue consumer whose no-op counts what it runs and puts each
 * command's submit → start latency (its payload carries when its submit began) into a histogram;
 * on each `window` message it reports its total and the histogram since the last one.
 */
runChild(async () => {
  const spec = readSpec<ConsumerSpec>();
  let total = 0;
  let latency: Histogram = new Map();
  const onExecute = (payload: BenchPayload): void => {
    total++;
    if (payload.at !== undefined) record(latency, preciseNow() - payload.at);
  };
  const consumer = await prepareConsumer(spec, onExecute);
  let resolveStop: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (resolveStop = resolve));
  const started = new Promise<void>((resolve) => {
    process.on('message', (m: { type: string }) => {
      if (m.type === 'go') resolve();
      else if (m.type === 'stop') resolveStop();
      else if (m.type === 'window') {
        const pairs = [...latency.entries()];
        latency = new Map();
        void send({ type: 'window', total, latency: pairs });
      }
    });
  });
  await send({ type: 'ready' });
  await started;
  await consumer.go();
  await stopped;
  await consumer.stop();
});
