import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `node --test` on one file in a child process, with the TAP reporter (stable to read). */
function nodeTest(file: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--test', '--test-reporter=tap', file],
      { timeout: 60_000, encoding: 'utf8' },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('the kit under node:test', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), `asynccmd-testing-${process.pid}-`));
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('runs the compiled example test file and passes', async () => {
    const example = fileURLToPath(new URL('../examples/dist/order-notify.node-test.js', import.meta.url));

    const run = await nodeTest(example);

    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^# pass 2$/m);
    expect(run.stdout).toMatch(/^# fail 0$/m);
    expect(run.code).toBe(0);
  });

  it('reports a failed expectSubmitted as a failing test with the kit message', async () => {
    const require = createRequire(import.meta.url);
    const kitUrl = pathToFileURL(require.resolve('@asynccmd/testing')).href;
    const file = join(scratch, 'failing.test.mjs');
    await writeFile(
      file,
      [
        "import { test } from 'node:test';",
        `import { createTestKit } from ${JSON.stringify(kitUrl)};`,
        "const notify = { type: 'order.notify', execute() {} };",
        "test('expects a command that was never submitted', async () => {",
        '  const kit = await createTestKit({ executors: [notify] });',
        "  try { await kit.expectSubmitted('order.notify', { orderId: 'o-404' }); } finally { await kit.close(); }",
        '});',
      ].join('\n'),
    );

    const run = await nodeTest(file);

    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^# fail 1$/m);
    expect(run.stdout).toContain("code: 'ERR_ASSERTION'");
    expect(run.stdout).toContain(
      'expected a submitted "order.notify" command with a payload matching {"orderId":"o-404"}, but none was.',
    );
    expect(run.stdout).toContain('Nothing was submitted.');
  });
});
