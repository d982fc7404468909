import { describe, expect, it } from 'vitest';
import { WorkPool, type PoolJob } from '../src/work-pool.js';

function gate(): { job: PoolJob; open: () => void; started: () => boolean } {
  let open = (): void => undefined;
  let started = false;
  const done = new Promise<void>((r) => (open = r));
  return { job: { run: () => ((started = true), done) }, open: () => open(), started: () => started };
}

describe('WorkPool', () => {
  it('counts free capacity as idle slots plus queue room and refuses when both are full', async () => {
    let freed = 0;
    const pool = new WorkPool('p', { concurrency: 2, queueSize: 1 }, () => freed++);
    const [a, b, c, d] = [gate(), gate(), gate(), gate()];
    expect(pool.free).toBe(3);
    expect(pool.offer(a.job)).toBe(true);
    expect(pool.offer(b.job)).toBe(true);
    expect(pool.offer(c.job)).toBe(true);
    expect(pool.state()).toMatchObject({ active: 2, queued: 1, free: 0 });
    expect(pool.offer(d.job)).toBe(false);
    expect(c.started()).toBe(false);
    a.open();
    await new Promise((r) => setTimeout(r, 0));
    expect(c.started()).toBe(true);
    expect(freed).toBe(1);
    b.open();
    c.open();
    await pool.whenIdle();
    expect(pool.state()).toMatchObject({ active: 0, queued: 0, free: 3 });
  });

  it('gives back queued jobs unstarted on drain, and frees a slot even if a job rejects', async () => {
    const pool = new WorkPool('p', { concurrency: 1, queueSize: 2 });
    const a = gate();
    const b = gate();
    pool.offer({ run: () => Promise.reject(new Error('boom')) });
    pool.offer(a.job);
    pool.offer(b.job);
    await new Promise((r) => setTimeout(r, 0));
    expect(a.started()).toBe(true);
    expect(pool.drainQueue()).toEqual([b.job]);
    a.open();
    await pool.whenIdle();
    expect(b.started()).toBe(false);
  });

  it('refuses nonsense sizes with a typed error', () => {
    expect(() => new WorkPool('p', { concurrency: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new WorkPool('p', { concurrency: 1, queueSize: -1 })).toThrow(/queueSize/);
  });
});
