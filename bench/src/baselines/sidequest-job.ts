import { Job } from 'sidequest';
import type { BenchPayload } from '../protocol.js';

/**
 * The bench's no-op job for Sidequest, in a module of its own: Sidequest records the file a job
 * class lives in and imports it to run the job. With the inline runner and no fork that import is
 * this process's own module instance, so the hook set by the consumer sees every run.
 */

let hook: (payload: BenchPayload) => void = () => undefined;

export function onBenchJob(fn: (payload: BenchPayload) => void): void {
  hook = fn;
}

export class BenchNoopJob extends Job {
  run(payload: BenchPayload): void {
    hook(payload);
  }
}
