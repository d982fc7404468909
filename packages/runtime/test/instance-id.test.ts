import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { createAsyncCommands } from '../src/index.js';
import { stubStore } from './stub-store.js';

const runtime = (instanceId?: unknown) =>
  createAsyncCommands({
    store: stubStore({}),
    executors: [],
    ...(instanceId === undefined ? {} : { instanceId }),
  } as never);

describe('the instance id a runtime claims under', () => {
  it('defaults to host and process, different for every runtime', () => {
    const [a, b] = [runtime().instanceId, runtime().instanceId];
    expect(a).not.toBe(b);
    expect(a.startsWith(`${hostname().slice(0, 80)}/${process.pid}/`)).toBe(true);
    expect(a.length).toBeLessThanOrEqual(128);
  });

  it('takes a name of 1 to 128 characters, and refuses anything else with INVALID_ARGUMENT', () => {
    expect(runtime('billing-7').instanceId).toBe('billing-7');
    for (const bad of ['', 'x'.repeat(129), 42]) {
      expect(() => runtime(bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });
});
