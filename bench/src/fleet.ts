import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FromChild, ToChild } from './protocol.js';

/** Every child ever started, so an exit of the orchestrator (even on error) can end them. */
const live = new Set<ChildProcess>();

process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** A forked worker (bench/dist/workers/<name>.js) speaking the protocol. */
export class Child {
  private readonly messages: FromChild[] = [];
  private waiters: (() => void)[] = [];
  private exited = false;
  readonly errors: string[] = [];

  private constructor(private readonly proc: ChildProcess) {
    proc.on('message', (m: FromChild) => {
      if (m.type === 'error') this.errors.push(m.message);
      this.messages.push(m);
      this.wake();
    });
    // A send racing the child's own exit fails with ERR_IPC_CHANNEL_CLOSED: harmless, it is leaving.
    proc.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ERR_IPC_CHANNEL_CLOSED') this.errors.push(err.message);
      this.wake();
    });
    proc.on('exit', (code, signal) => {
      live.delete(proc);
      this.exited = true;
      if (code !== 0 && signal !== 'SIGKILL' && signal !== 'SIGTERM') {
        this.errors.push(`child exited with code ${code ?? 'null'} signal ${signal ?? 'none'}`);
      }
      this.wake();
    });
  }

  static start(worker: string, spec: unknown): Child {
    const path = fileURLToPath(new URL(`./workers/${worker}.js`, import.meta.url));
    const proc = fork(path, [JSON.stringify(spec)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    live.add(proc);
    return new Child(proc);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  send(message: ToChild): void {
    if (!this.exited && this.proc.connected) this.proc.send(message);
  }

  /** Messages of this type received so far. */
  received<T extends FromChild['type']>(type: T): Extract<FromChild, { type: T }>[] {
    return this.messages.filter((m): m is Extract<FromChild, { type: T }> => m.type === type);
  }

  /** Latest progress figure reported. */
  get executed(): number {
    return this.progress?.executed ?? 0;
  }

  /** Latest progress message, if any. */
  get progress(): Extract<FromChild, { type: 'progress' }> | undefined {
    const progress = this.received('progress');
    return progress[progress.length - 1];
  }

  /** Resolves once a message of this type arrives; rejects on error, exit or timeout. */
  async waitFor<T extends FromChild['type']>(
    type: T,
    timeoutMs: number,
  ): Promise<Extract<FromChild, { type: T }>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received(type)[0];
      if (found) return found;
      if (this.errors.length > 0) throw new Error(this.errors.join('; '));
      if (this.exited) throw new Error(`child exited before sending '${type}'`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for '${type}'`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Asks the child to stop and waits for it to exit; kills it if it does not within `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.exited) return;
    this.send({ type: 'stop' });
    const deadline = Date.now() + graceMs;
    while (!this.exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    if (!this.exited) {
      this.errors.push(`child did not exit within ${graceMs} ms of stop; killed`);
      this.proc.kill('SIGKILL');
      while (!this.exited) await new Promise((r) => setTimeout(r, 20));
    }
  }

  kill(): void {
    if (!this.exited) this.proc.kill('SIGKILL');
  }
}

/** Starts `count` children of one worker and waits until all report ready. */
export async function startAll(
  worker: string,
  specs: readonly unknown[],
  readyTimeoutMs = 60_000,
): Promise<Child[]> {
  const children = specs.map((spec) => Child.start(worker, spec));
  try {
    await Promise.all(children.map((c) => c.waitFor('ready', readyTimeoutMs)));
  } catch (err) {
    for (const c of children) c.kill();
    throw err;
  }
  return children;
}

export async function stopAll(children: readonly Child[]): Promise<void> {
  await Promise.all(children.map((c) => c.stop()));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
