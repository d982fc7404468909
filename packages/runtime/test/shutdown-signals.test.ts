import { describe, expect, it } from 'vitest';
import { installShutdownHandlers, type StopOptions } from '../src/index.js';

describe('installShutdownHandlers', () => {
  it('stops gracefully on the first signal, exits at once on the second', async () => {
    const stops: StopOptions[] = [];
    const exits: number[] = [];
    let finish = (): void => undefined;
    const runtime = {
      stop: (options?: StopOptions) => {
        stops.push(options ?? {});
        return new Promise<void>((r) => (finish = r));
      },
    };
    const uninstall = installShutdownHandlers(runtime, {
      signals: ['SIGUSR2'],
      timeoutMs: 1234,
      exit: (code) => void exits.push(code),
    });
    try {
      process.emit('SIGUSR2', 'SIGUSR2');
      expect(stops).toEqual([{ timeoutMs: 1234 }]);
      expect(exits).toEqual([]);
      process.emit('SIGUSR2', 'SIGUSR2');
      expect(exits).toEqual([1]);
      finish();
      await new Promise((r) => setTimeout(r, 0));
      expect(exits).toEqual([1, 0]);
    } finally {
      uninstall();
    }
    expect(process.listenerCount('SIGUSR2')).toBe(0);
  });
});
