import { describe, expect, it } from 'vitest';
import { WorkPool, type PoolJob, type PoolJobTail } from '../src/work-pool.js';

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

  it('admits work claimed for its room even once that room has shrunk: queued, never refused', async () => {
    const pool = new WorkPool('p', { concurrency: 1, queueSize: 1 });
    const [a, b, c] = [gate(), gate(), gate()];
    pool.admit(a.job);
    pool.admit(b.job);
    pool.admit(c.job); // past queueSize: a claim sized for more room than is left now
    expect(pool.state()).toMatchObject({ active: 1, queued: 2, free: 0 });
    expect(pool.offer(gate().job)).toBe(false);
    a.open();
    b.open();
    c.open();
    await pool.whenIdle();
    expect([a.started(), b.started(), c.started()]).toEqual([true, true, true]);
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

  it('frees a slot once its job has run, but holds slots while more outcomes are unwritten than it runs at once', async () => {
    let freed = 0;
    const pool = new WorkPool('p', { concurrency: 2 }, () => freed++);
    const writes: (() => void)[] = [];
    const ranWithTail: PoolJob = {
      run: async (): Promise<PoolJobTail> => ({
        recorded: new Promise<void>((resolve) => writes.push(resolve)),
      }),
    };
    const turn = () => new Promise((r) => setTimeout(r, 0));
    pool.offer(ranWithTail);
    pool.offer(ranWithTail);
    await turn();
    // Both ran; their outcomes are being written: the slots can take the next claim meanwhile.
    expect(pool.state()).toMatchObject({ active: 0, recording: 2, free: 2 });
    pool.offer(ranWithTail);
    await turn();
    // Three unwritten outcomes for a pool of two: the one beyond holds a slot.
    expect(pool.state()).toMatchObject({ active: 0, recording: 3, free: 1 });
    pool.offer(ranWithTail);
    await turn();
    expect(pool.state()).toMatchObject({ recording: 4, free: 0 });
    let idle = false;
    void pool.whenIdle().then(() => (idle = true));
    writes.splice(0, 3).forEach((w) => w());
    await turn();
    expect(pool.state()).toMatchObject({ recording: 1, free: 2 });
    expect(idle).toBe(false); // an outcome is still being written
    writes.splice(0).forEach((w) => w());
    await turn();
    expect(idle).toBe(true);
    expect(freed).toBe(8); // every slot and every write that came free was reported
  });

  it('holds queue room too once more outcomes are unwritten than its slots and queue hold', async () => {
    const pool = new WorkPool('p', { concurrency: 1, queueSize: 2 });
    const writes: (() => void)[] = [];
    const ranWithTail: PoolJob = {
      run: async (): Promise<PoolJobTail> => ({
        recorded: new Promise<void>((resolve) => writes.push(resolve)),
      }),
    };
    const turn = () => new Promise((r) => setTimeout(r, 0));
    for (let i = 0; i < 3; i++) pool.offer(ranWithTail);
    await turn();
    // Three unwritten for one slot: the two beyond hold the slot, the queue is still open.
    expect(pool.state()).toMatchObject({ active: 0, recording: 3, free: 2 });
    for (let i = 0; i < 2; i++) pool.offer(ranWithTail);
    await turn();
    // Five unwritten: beyond slots and queue, so nothing more is claimed until some are written.
    expect(pool.state()).toMatchObject({ active: 0, recording: 5, free: 0 });
    writes.splice(0).forEach((w) => w());
    await pool.whenIdle();
    expect(pool.state()).toMatchObject({ recording: 0, free: 3 });
  });

  it('refuses nonsense sizes with a typed error', () => {
    expect(() => new WorkPool('p', { concurrency: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new WorkPool('p', { concurrency: 1, queueSize: -1 })).toThrow(/queueSize/);
  });

  it('sizes its queue from measured execution and claim times unless queueSize fixes it', async () => {
    const fixed = new WorkPool('f', { concurrency: 1, queueSize: 3 });
    fixed.claimTook(50);
    expect(fixed.state()).toMatchObject({ queueSize: 3, adaptiveQueue: false });

    const pool = new WorkPool('a', { concurrency: 1 });
    // Nothing measured yet: claim only what can start.
    expect(pool.state()).toMatchObject({ queueSize: 0, adaptiveQueue: true, free: 1 });
    pool.claimTook(5);
    pool.offer({ run: async () => undefined });
    await pool.whenIdle();
    // A no-op next to 5 ms claims: the queue grows far past the single slot.
    const grown = pool.queueSize;
    expect(grown).toBeGreaterThan(10);
    expect(pool.free).toBe(1 + grown);
    expect(pool.refillAt).toBe(Math.ceil((1 + grown) / 2));
    // One 30 ms command next to 1 ms claims: at most one command's worth stays queued.
    for (let i = 0; i < 30; i++) pool.claimTook(1);
    pool.offer({ run: () => new Promise<void>((r) => setTimeout(r, 30)) });
    await pool.whenIdle();
    expect(pool.queueSize).toBeLessThanOrEqual(1);
  });
});
