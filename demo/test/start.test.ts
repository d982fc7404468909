import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config.js';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { DEMO_MAIN, startChildDemo } from '../src/experiment/child-demo.js';
import { httpJson } from '../src/load/http-client.js';
import { startDemoService } from '../src/service.js';

const dir = mkdtempSync(join(tmpdir(), 'demo-start-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the built `npm start` entry to completion; SIGKILLs it if it outlives the test. */
function runMain(
  args: string[],
  timeoutMs = 50_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DEMO_MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`demo did not exit within ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('npm start', () => {
  it('runs the built-in load through HTTP, prints the summary and exits with --exit-after-load', async () => {
    expect(existsSync(DEMO_MAIN)).toBe(true);
    const db = join(dir, 'start.db');
    const { code, stdout, stderr } = await runMain([
      '--exit-after-load',
      '--orders',
      '30',
      '--port',
      '0',
      '--db',
      db,
    ]);
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/order demo listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(stdout).toMatch(/requests +30 POST \/orders/);
    expect(stdout).toMatch(/accepted +\d+ operations/);
    expect(stdout).toMatch(/accept→terminal +p50 .* · p99 /);
    // Not a TTY here: plain progress lines, no carriage returns.
    expect(stderr).toMatch(/orders +100% \(30\/30\)/);
    expect(stderr).not.toContain('\r');
  }, 60_000);

  it('says which database it could not open, with no driver text or stack', async () => {
    const { code, stdout, stderr } = await runMain([
      '--db',
      'postgres://someone:secret@127.0.0.1:1/test',
      '--no-load',
      '--port',
      '0',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /^could not open one PostgreSQL schema: asynccmd_demo_\w+ on postgres:\/\/someone:\*\*\*@127\.0\.0\.1:1\/test \(ECONNREFUSED\)/,
    );
    expect(stderr).not.toContain('secret');
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stdout).not.toContain('listening on');
  });

  it('refuses an unknown option with the help text', async () => {
    const { code, stderr } = await runMain(['--bogus']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/unknown option --bogus/);
  });
});

describe('serving', () => {
  it('stops gracefully on SIGINT: exit code 0 after the runtime stopped', async () => {
    const demo = await startChildDemo({ dialect: 'sqlite', file: join(dir, 'sigint.db') });
    try {
      const answer = await httpJson(`${demo.url}/orders`, 'POST', {
        customerId: 'c',
        email: 'c@example.test',
        items: [{ sku: 'mug', quantity: 1 }],
      });
      expect(answer.status).toBe(201);
      const exited = new Promise<number | null>((resolve) =>
        demo.child.once('exit', (code) => resolve(code)),
      );
      demo.child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(demo.output()).toMatch(/SIGINT: shutting down gracefully[\s\S]*stopped\./);
      // The dashboard's address, and how to log in (nothing to: the demo's admin API is open to loopback).
      expect(demo.output()).toMatch(/dashboard +http:\/\/127\.0\.0\.1:\d+\/admin\/dashboard +\(no login/);
    } finally {
      await demo.kill();
    }
  });

  it('moves to a free port only when allowed to (the default port); a port asked for is that port or an error', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const taken = (blocker.address() as AddressInfo).port;
    try {
      const service = await startDemoService({
        filename: join(dir, 'port.db'),
        port: taken,
        movePortIfTaken: true,
        boundary: 'synchronous',
      });
      try {
        expect(service.portFallback).toBe(true);
        expect(service.port).not.toBe(taken);
        expect((await httpJson(`${service.url}/health`, 'GET')).status).toBe(200);
      } finally {
        await service.close();
      }
      await expect(
        startDemoService({ filename: join(dir, 'port-explicit.db'), port: taken, boundary: 'synchronous' }),
      ).rejects.toThrow(`port ${taken} on 127.0.0.1 is already in use`);
      const { code, stdout, stderr } = await runMain([
        '--no-load',
        '--port',
        String(taken),
        '--db',
        join(dir, 'main-port.db'),
      ]);
      expect(code, stdout).toBe(1);
      expect(stderr).toContain(`port ${taken} on 127.0.0.1 is already in use`);
      expect(stdout).not.toContain('listening on');
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});

describe('parseConfig', () => {
  it('reads flags over environment variables, and defaults to a fresh database file', () => {
    const c = parseConfig(['--orders', '5', '--no-load', '--port=0'], { PORT: '4000', DEMO_ORDERS: '9' });
    expect(c).toMatchObject({ orders: 5, port: 0, load: false, exitAfterLoad: false, freshDb: true });
    expect(parseConfig([], { PORT: '4000' })).toMatchObject({ port: 4000, orders: 300, load: true });
    // Only the default port may move when taken; one asked for (flag or PORT) is that port.
    expect(parseConfig([], {})).toMatchObject({ port: 3000, movePortIfTaken: true });
    expect(parseConfig(['--port', '3000'], {})).toMatchObject({ port: 3000, movePortIfTaken: false });
    expect(parseConfig([], { PORT: '3000' })).toMatchObject({ port: 3000, movePortIfTaken: false });
    expect(() => parseConfig(['--orders', '-1'])).toThrow(/--orders must be an integer/);
    expect(parseConfig(['--help'])).toBe('help');
    // A server URL gets a generated schema (dropped at exit) unless --schema names one (kept).
    expect(parseConfig(['--db', 'postgres://p@h/db'], {})).toMatchObject({
      database: {
        dialect: 'postgres',
        url: 'postgres://p@h/db',
        schema: expect.stringMatching(/^asynccmd_demo_/),
      },
      freshDb: true,
    });
    expect(parseConfig(['--db', 'mysql://r@h/db', '--schema', 'shop'], {})).toMatchObject({
      database: { dialect: 'mysql', schema: 'shop' },
      freshDb: false,
    });
    expect(() => parseConfig(['--db', 'mysql://r@h/db', '--schema', 'drop table'], {})).toThrow(
      /--schema: schema name must be/,
    );
    expect(() => parseConfig(['--schema', 'shop'], {})).toThrow(/--schema needs a postgres/);
  });
});
