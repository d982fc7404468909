import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');

describe('stop()', () => {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-stop-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('leaves no timer behind, so a script that stops the runtime exits at once', () => {
    // A fresh process, as a script that runs a command and stops: what is still active after stop()
    // would keep it alive (a wait of the shutdown timeout, here ten minutes, would be a Timeout).
    const script = `
      import { createAsyncCommands, defineExecutor } from '@asynccmd/runtime';
      import { createSqliteStore } from '@asynccmd/adapter-sqlite';
      const store = createSqliteStore({ filename: ${JSON.stringify(join(dir, 'stop.db'))} });
      await store.migrate();
      const job = defineExecutor({ type: 'stop.job', mode: 'SCHEDULED', execute: () => undefined });
      const commands = createAsyncCommands({
        store,
        executors: [job],
        pollIntervalMs: 20,
        retention: { olderThanMs: 0, intervalMs: 20 }, // every background service runs
      });
      const ran = new Promise((resolve) => commands.on((e) => e.kind === 'succeeded' && resolve()));
      commands.start();
      await commands.client.transaction((_db, submit) => submit('stop.job', {}));
      await ran;
      await commands.stop({ timeoutMs: 600_000 });
      console.log(JSON.stringify(process.getActiveResourcesInfo()));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: PACKAGE,
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(child.stdout, child.stderr).not.toBe('');
    expect(JSON.parse(child.stdout) as string[]).not.toContain('Timeout');
    expect(child.status, child.stderr).toBe(0);
  });
});
