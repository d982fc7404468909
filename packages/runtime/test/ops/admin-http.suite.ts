import { describeFailure, type CommandStore } from '@asynccmd/core';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminHandler, type AdminHandlerOptions } from '../../src/ops/admin-handler.js';
import { startAdminServer, type AdminServer, type AdminServerOptions } from '../../src/ops/admin-server.js';
import { createMetrics, type CommandMetrics } from '../../src/ops/metrics.js';
import { publicStatusPath } from '../../src/ops/public-status.js';
import { publicWorkflowStatusPath } from '../../src/ops/public-workflow-status.js';
import { statusPath } from '../../src/ops/status-resource.js';
import { client, errorCode, rawRequest, type Answer } from './http-client.js';
import {
  claim,
  countingStore,
  failLastAttempt,
  makeDead,
  recordingLogger,
  submit,
  submitIdempotent,
  submitTwoStepWorkflow,
  submitWorkflow,
  succeed,
  untilDatabaseClockPasses,
} from './support.js';

export interface OpsDatabase {
  readonly store: CommandStore;
  /** The URL the CLI would use to reach the same table. */
  readonly url: string;
  /** Extra CLI arguments naming the namespace (e.g. ['--schema', 'x']). */
  readonly cliArgs: readonly string[];
  /** A store of the same kind whose database cannot be reached (closed, or a dead port). */
  unreachable(): Promise<CommandStore>;
  dispose(): Promise<void>;
}

export const TOKEN = 'test-token-0123456789abcdef';
const STATUS_SECRET = 'status-secret-0123456789abcdef-0123';

/** The code of what `fn` throws (or 'returned'). */
function thrownCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as { code?: string }).code ?? `not an asynccmd error: ${String(e)}`;
  }
  return 'returned';
}

interface HealthBody {
  status: 'UP' | 'DOWN';
  reasons: { code: string; message: string; detail?: string }[];
  checks: { database: string; deadLetters: number | null; oldestPendingAgeMs: number | null };
  checkedAt: string;
}

interface StatusBody {
  id: string;
  type: string;
  bizKey: string | null;
  status: string;
  operation: string;
  terminal: boolean;
  attempts: { failed: number; maxRetry: number; rescued: number };
  lastError: string | null;
  nextRunAt: string;
  createdAt: string;
  links: { self: string };
}

/** The admin HTTP API against one real database; each adapter's test file runs it with one line. */
export function describeAdminHttp(name: string, open: () => Promise<OpsDatabase>): void {
  describe(`admin HTTP API on ${name}`, () => {
    let db: OpsDatabase;
    let store: CommandStore;
    let server: AdminServer;
    let metrics: CommandMetrics;
    let api: ReturnType<typeof client>;

    beforeAll(async () => {
      db = await open();
      store = db.store;
      metrics = createMetrics({ store });
      // Health answers are not cached here: these tests watch it change from one request to the next.
      server = await startAdminServer({ store, token: TOKEN, metrics, health: { cacheMs: 0 } });
      api = client(server.url, TOKEN);
    });

    afterAll(async () => {
      await server?.close();
      await db?.dispose();
    });

    /** Kills every dead letter so health checks start from a clean table. */
    async function killAllDead(): Promise<void> {
      const page = await store.list({ status: 'DEAD', limit: 1000 });
      for (const c of page.items) expect((await api.post(`/commands/${c.id}/kill`)).status).toBe(200);
    }

    it('serves the status resource an API points a 202 at, following the command to completion', async () => {
      const id = await submit(store, 'status.follow', { bizKey: 'order-17' });
      const accepted = await api.get(`/commands/${id}`);
      expect(accepted.status).toBe(200);
      const body = accepted.body as StatusBody;
      expect(body).toMatchObject({
        id,
        type: 'status.follow',
        bizKey: 'order-17',
        status: 'PENDING',
        operation: 'accepted',
        terminal: false,
        attempts: { failed: 0, maxRetry: 3, rescued: 0, retriesLeft: 3 },
        lastError: null,
        history: [],
        links: { self: `/commands/${id}` },
      });
      expect(Date.parse(body.createdAt)).not.toBeNaN();
      expect(accepted.headers.get('retry-after')).toBe('2');
      expect(accepted.headers.get('cache-control')).toBe('no-store');
      expect(body).not.toHaveProperty('payload');

      const c = await claim(store, id);
      expect(((await api.get(`/commands/${id}`)).body as StatusBody).operation).toBe('processing');
      await store.complete([{ id: c.id, token: c.claimToken }]);
      const done = await api.get(`/commands/${id}`);
      expect(done.body).toMatchObject({ status: 'SUCCESS', operation: 'completed', terminal: true });
      expect(done.headers.get('retry-after')).toBeNull();
    });

    it("carries the executor's result on GET /commands/:id: null until SUCCESS, never in list items", async () => {
      const id = await submit(store, 'status.result');
      const accepted = await api.get(`/commands/${id}`);
      expect(accepted.body).toMatchObject({ status: 'PENDING', result: null });
      const c = await claim(store, id);
      expect((await api.get(`/commands/${id}`)).body).toMatchObject({ status: 'RUNNING', result: null });
      const produced = { invoice: 'INV-2041', lines: [1, 2], note: '<b>ü</b>' };
      await store.complete([{ id: c.id, token: c.claimToken, resultJson: JSON.stringify(produced) }]);
      const done = await api.get(`/commands/${id}`);
      expect(done.body).toMatchObject({ status: 'SUCCESS', operation: 'completed', result: produced });

      // A success that left no result, and a command that never succeeded, answer null alike.
      const bare = await succeed(store, await submit(store, 'status.result'));
      expect((await api.get(`/commands/${bare.id}`)).body).toMatchObject({ status: 'SUCCESS', result: null });
      const dead = await makeDead(store, 'status.result');
      expect((await api.get(`/commands/${dead}`)).body).toMatchObject({ status: 'DEAD', result: null });

      const listed = (await api.get('/commands?type=status.result')).body as { items: StatusBody[] };
      expect(listed.items.map((i) => i.id)).toEqual([dead, bare.id, id]);
      for (const item of listed.items) expect(item).not.toHaveProperty('result');
      await api.post(`/commands/${dead}/kill`);
    });

    it('carries the progress its executor reported on GET /commands/:id, in list items and on the public status', async () => {
      const id = await submit(store, 'status.progress');
      expect((await api.get(`/commands/${id}`)).body).toMatchObject({ status: 'PENDING', progress: null });
      const c = await claim(store, id);
      expect(await store.reportProgress([{ id, token: c.claimToken, done: 40, total: 160 }])).toEqual([id]);
      expect((await api.get(`/commands/${id}`)).body).toMatchObject({
        status: 'RUNNING',
        progress: { done: 40, total: 160 },
      });
      const listed = (await api.get('/commands?type=status.progress')).body as {
        items: { progress: unknown }[];
      };
      expect(listed.items.map((i) => i.progress)).toEqual([{ done: 40, total: 160 }]);
      const open = await startAdminServer({ store, token: TOKEN, publicStatus: { secret: STATUS_SECRET } });
      try {
        const seen = await client(open.url).get(publicStatusPath(id, { secret: STATUS_SECRET }));
        expect(seen.body).toMatchObject({ operation: 'processing', progress: { done: 40, total: 160 } });
      } finally {
        await open.close();
      }
      await store.complete([{ id, token: c.claimToken }]);
      expect((await api.get(`/commands/${id}`)).body).toMatchObject({
        status: 'SUCCESS',
        progress: { done: 40, total: 160 },
      });
    });

    it('answers 400 for a malformed id, 404 for an unknown one, 404/405 for unknown routes and methods', async () => {
      for (const bad of ['abc', '0', '-3', '99999999999999999999', "1'%20OR%20'1'='1", '%E0%A4%A']) {
        const a = await api.get(`/commands/${bad}`);
        expect(a.status, bad).toBe(400);
        expect(errorCode(a)).toBe('INVALID_ID');
      }
      const missing = await api.get('/commands/987654321');
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({
        error: { code: 'NOT_FOUND', message: 'command 987654321 does not exist' },
      });
      expect((await api.post('/commands/987654321/retry')).status).toBe(404);
      expect((await api.post('/commands/abc/kill')).status).toBe(400);
      expect(errorCode(await api.get('/nowhere'))).toBe('ROUTE_NOT_FOUND');
      expect((await api.post('/commands/1/explode')).status).toBe(404);
      const wrongMethod = await api.get('/commands/1/retry');
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.headers.get('allow')).toBe('POST');
      expect((await api.post('/stats')).status).toBe(405);
    });

    it('lists with filters and cursor paging, and refuses a bad query with 400', async () => {
      const ids = [
        await submit(store, 'list.page', { bizKey: 'k1' }),
        await submit(store, 'list.page', { bizKey: 'k2' }),
        await submit(store, 'list.page', { bizKey: 'k3' }),
      ];
      await makeDead(store, 'list.page');
      const first = await api.get('/commands?type=list.page&status=PENDING&limit=2');
      expect(first.status).toBe(200);
      const page1 = first.body as { items: StatusBody[]; nextCursor: string | null; links: { next: string } };
      expect(page1.items.map((i) => i.id)).toEqual([ids[2], ids[1]]);
      expect(page1.nextCursor).not.toBeNull();
      expect(page1.links.next).toContain('cursor=');
      const second = await api.get(page1.links.next);
      const page2 = second.body as { items: StatusBody[]; nextCursor: string | null };
      expect(page2.items.map((i) => i.id)).toEqual([ids[0]]);
      expect(page2.nextCursor).toBeNull();

      const byKey = await api.get('/commands?type=list.page&bizKey=k2');
      expect((byKey.body as { items: StatusBody[] }).items.map((i) => i.id)).toEqual([ids[1]]);
      const dead = await api.get('/commands?type=list.page&status=dead');
      expect((dead.body as { items: StatusBody[] }).items.map((i) => i.operation)).toEqual([
        'follow_up_failed',
      ]);

      for (const q of [
        'status=ZOMBIE',
        'limit=0',
        'limit=5000',
        'limit=x',
        'stauts=DEAD',
        'type=a&type=b',
        'cursor=a%20b',
      ]) {
        const a = await api.get(`/commands?${q}`);
        expect(a.status, q).toBe(400);
        expect(errorCode(a), q).toBe('INVALID_ARGUMENT');
      }
      await killAllDead();
    });

    it('GET /workflows/:id shows every step; POST /workflows/:id/cancel cancels what has not started', async () => {
      const id = `wf-http-${Math.random().toString(36).slice(2, 8)}`;
      const { a, b } = await submitTwoStepWorkflow(store, id);
      const shown = await api.get(`/workflows/${id}`);
      expect(shown.status).toBe(200);
      expect(shown.headers.get('retry-after')).not.toBeNull();
      expect(shown.body).toMatchObject({
        id,
        state: 'accepted',
        terminal: false,
        progress: { done: 0, total: 2 },
        steps: [
          { name: 'a', id: a, status: 'PENDING', state: 'accepted' },
          { name: 'b', id: b, status: 'WAITING', state: 'accepted' },
        ],
        links: { steps: { a: `/commands/${a}`, b: `/commands/${b}` } },
      });
      expect((await api.anonymous.get(`/workflows/${id}`)).status).toBe(401);
      expect((await api.get('/workflows/no-such-workflow')).status).toBe(404);
      expect((await api.post(`/workflows/${id}/cancel`, { because: 'x' })).status).toBe(400);
      const cancelled = await api.post(`/workflows/${id}/cancel`, { reason: 'order withdrawn' });
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toMatchObject({ workflow: { state: 'cancelled', terminal: true } });
      expect([...(cancelled.body as { cancelled: string[] }).cancelled].sort()).toEqual([a, b].sort());
      expect((await store.get(a))?.lastError).toBe('order withdrawn');
      expect((await store.get(b))?.lastError).toMatch(/depends on/);
    });

    it('reports counts by status and type, and the oldest pending age', async () => {
      await submit(store, 'stats.a');
      await succeed(store, await submit(store, 'stats.a'));
      await submit(store, 'stats.b', { runAt: new Date(Date.now() - 3_600_000) });
      const a = await api.get('/stats');
      expect(a.status).toBe(200);
      const stats = a.body as {
        byStatus: Record<string, number>;
        byType: Record<string, Record<string, number>>;
        oldestDueAt: string | null;
        oldestPendingAgeMs: number | null;
        total: number;
      };
      expect(stats.byType['stats.a']).toEqual({
        WAITING: 0,
        PENDING: 1,
        RUNNING: 0,
        SUCCESS: 1,
        DEAD: 0,
        CANCELLED: 0,
      });
      expect(stats.byType['stats.b']?.PENDING).toBe(1);
      expect(Object.keys(stats.byStatus)).toEqual([
        'WAITING',
        'PENDING',
        'RUNNING',
        'SUCCESS',
        'DEAD',
        'CANCELLED',
      ]);
      expect(stats.oldestPendingAgeMs).toBeGreaterThanOrEqual(3_500_000);
      expect(stats.total).toBeGreaterThanOrEqual(3);
      // Leave nothing overdue behind for the health checks.
      const overdue = await store.list({ type: 'stats.b', limit: 10 });
      for (const c of overdue.items) await api.post(`/commands/${c.id}/cancel`);
    });

    it('runs retry, requeue, kill and cancel, and answers an illegal transition with 409 and the reason', async () => {
      const deadId = await makeDead(store, 'admin.t');
      const retried = await api.post(`/commands/${deadId}/retry`);
      expect(retried.status).toBe(200);
      // The record survives a retry: the failed attempt still counts, and the history shows it.
      expect(retried.body).toMatchObject({
        id: deadId,
        status: 'PENDING',
        attempts: { failed: 1, maxRetry: 0, retriesLeft: 0 },
        history: [{ outcome: 'dead', error: 'downstream said no', instance: null }],
      });
      const [attempt] = (retried.body as { history: { startedAt: string; finishedAt: string }[] }).history;
      expect(Date.parse(attempt!.finishedAt)).toBeGreaterThanOrEqual(Date.parse(attempt!.startedAt));

      const again = await api.post(`/commands/${deadId}/retry`);
      expect(again.status).toBe(409);
      expect(errorCode(again)).toBe('ILLEGAL_TRANSITION');
      expect((again.body as { error: { message: string } }).error.message).toContain('it is PENDING');

      const running = await submit(store, 'admin.t');
      await claim(store, running);
      const cancelRunning = await api.post(`/commands/${running}/cancel`);
      expect(cancelRunning.status).toBe(409);
      expect((cancelRunning.body as { error: { message: string } }).error.message).toContain('RUNNING');
      expect((await api.post(`/commands/${running}/requeue`)).body).toMatchObject({ status: 'PENDING' });
      expect((await api.post(`/commands/${running}/requeue`)).status).toBe(409);

      const killed = await api.post(`/commands/${running}/kill`, { reason: 'customer withdrew' });
      expect(killed.status).toBe(200);
      expect(killed.body).toMatchObject({
        status: 'CANCELLED',
        operation: 'cancelled',
        lastError: 'customer withdrew',
      });

      const cancelled = await api.post(`/commands/${deadId}/cancel`, {});
      expect(cancelled.body).toMatchObject({ status: 'CANCELLED' });

      const badBodies: [string, unknown][] = [
        ['kill', { reason: 42 }],
        ['kill', { why: 'x' }],
        ['retry', { reason: 'retry takes no reason' }],
        ['kill', 'not json'],
        ['kill', '[1,2]'],
      ];
      const fresh = await submit(store, 'admin.t');
      for (const [action, body] of badBodies) {
        const a = await api.post(`/commands/${fresh}/${action}`, body);
        expect(a.status, JSON.stringify(body)).toBe(400);
        expect(errorCode(a)).toBe('INVALID_ARGUMENT');
      }
      expect((await store.get(fresh))?.status).toBe('PENDING');
      const huge = await api.post(`/commands/${fresh}/kill`, { reason: 'x'.repeat(20_000) });
      expect(huge.status).toBe(413);
    });

    it('answers 409 IDEMPOTENCY_CONFLICT when a retried dead letter would take a key a newer command holds', async () => {
      const dead = await makeDead(store, 'admin.idem', 'no', 'order-77');
      const holder = await submitIdempotent(store, 'admin.idem', 'order-77');
      const a = await api.post(`/commands/${dead}/retry`);
      expect(a.status).toBe(409);
      expect(errorCode(a)).toBe('IDEMPOTENCY_CONFLICT');
      expect((a.body as { error: { message: string } }).error.message).toContain(holder);
      expect((await store.get(dead))?.status).toBe('DEAD');
      await api.post(`/commands/${dead}/kill`);
      await api.post(`/commands/${holder}/cancel`);
    });

    it('requires the bearer token for listing, stats, metrics and mutations', async () => {
      const id = await submit(store, 'auth.t');
      const guarded: [string, string][] = [
        ['GET', '/commands'],
        ['GET', `/commands/${id}`],
        ['GET', '/stats'],
        ['GET', '/metrics'],
        ['POST', `/commands/${id}/kill`],
        ['POST', `/commands/${id}/cancel`],
        ['POST', `/commands/${id}/retry`],
        ['POST', `/commands/${id}/requeue`],
      ];
      for (const [method, path] of guarded) {
        const missing = await api.call(method, path, undefined, '');
        expect(missing.status, `${method} ${path}`).toBe(401);
        expect(errorCode(missing)).toBe('UNAUTHORIZED');
        expect(missing.headers.get('www-authenticate')).toContain('Bearer');
        expect((await api.call(method, path, undefined, `${TOKEN}-wrong`)).status).toBe(401);
      }
      expect((await store.get(id))?.status).toBe('PENDING');
      // Health stays public, for probes.
      expect([200, 503]).toContain((await api.anonymous.get('/health')).status);
    });

    it('answers 401 before 404 or 405 without the token, so the routes cannot be mapped', async () => {
      for (const [method, path] of [
        ['GET', '/commands/1/retry'],
        ['POST', '/stats'],
        ['POST', '/health'],
        ['DELETE', '/commands/1'],
        ['GET', '/nowhere'],
        ['POST', '/commands/1/explode'],
      ] as const) {
        const a = await api.call(method, path, undefined, '');
        expect(a.status, `${method} ${path}`).toBe(401);
        expect(errorCode(a)).toBe('UNAUTHORIZED');
      }
      expect((await api.get('/commands/1/retry')).status).toBe(405);
      expect((await api.get('/nowhere')).status).toBe(404);
    });

    it('a tokenless server serves nothing a web page could send: only JSON mutations, its own Origin, loopback Hosts', async () => {
      const open = await startAdminServer({ store, auth: 'none' });
      try {
        const dead = await makeDead(store, 'web.page');
        const retry = `/commands/${dead}/retry`;
        // What a cross-site form or a fetch without a preflight can send: these types, or none.
        for (const type of [
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          '',
        ]) {
          const a = await rawRequest(open.url, 'POST', retry, type ? { 'Content-Type': type } : {});
          expect(a.status, type).toBe(415);
          expect(errorCode(a)).toBe('UNSUPPORTED_MEDIA_TYPE');
        }
        for (const origin of ['https://evil.example', 'null', `http://127.0.0.1:${open.port + 1}`]) {
          const a = await rawRequest(open.url, 'POST', retry, {
            'Content-Type': 'application/json',
            Origin: origin,
          });
          expect(a.status, origin).toBe(403);
          expect(errorCode(a)).toBe('ORIGIN_NOT_ALLOWED');
        }
        expect((await store.get(dead))?.status).toBe('DEAD');

        // A DNS-rebinding page reaches the port under its own name: refused, reads too.
        for (const host of ['evil.example', `evil.example:${open.port}`, '192.0.2.1', '[2001:db8::1]:80']) {
          const a = await rawRequest(open.url, 'GET', '/commands', { Host: host });
          expect(a.status, host).toBe(403);
          expect(errorCode(a)).toBe('HOST_NOT_ALLOWED');
          expect(a.text).not.toContain('web.page');
        }
        for (const host of [
          `127.0.0.1:${open.port}`,
          `localhost:${open.port}`,
          `[::1]:${open.port}`,
          'LOCALHOST',
        ]) {
          expect((await rawRequest(open.url, 'GET', '/commands', { Host: host })).status, host).toBe(200);
        }
        const own = await rawRequest(open.url, 'POST', retry, {
          'Content-Type': 'application/json; charset=utf-8',
          Origin: `http://127.0.0.1:${open.port}`,
        });
        expect(own.status).toBe(200);
        expect((await store.get(dead))?.status).toBe('PENDING');
        await client(open.url).post(`/commands/${dead}/cancel`);
      } finally {
        await open.close();
      }
    });

    it('allow-lists let named Hosts and Origins in; with a token the Origin is still checked', async () => {
      const listed = await startAdminServer({
        store,
        auth: 'none',
        allowedHosts: ['ops.internal'],
        allowedOrigins: ['https://console.example'],
      });
      try {
        const id = await submit(store, 'allow.list');
        expect(
          (await rawRequest(listed.url, 'GET', '/stats', { Host: `ops.internal:${listed.port}` })).status,
        ).toBe(200);
        expect((await rawRequest(listed.url, 'GET', '/stats', { Host: 'other.internal' })).status).toBe(403);
        const headers = { Host: 'ops.internal', 'Content-Type': 'application/json' };
        const foreign = await rawRequest(listed.url, 'POST', `/commands/${id}/cancel`, {
          ...headers,
          Origin: 'https://console.example.evil',
        });
        expect(errorCode(foreign)).toBe('ORIGIN_NOT_ALLOWED');
        const console = await rawRequest(listed.url, 'POST', `/commands/${id}/cancel`, {
          ...headers,
          Origin: 'https://console.example',
        });
        expect(console.status).toBe(200);
      } finally {
        await listed.close();
      }
      const id = await submit(store, 'allow.list');
      const auth = { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' };
      // With a token, any Host name may reach it (the token is the guard), but no foreign page may post.
      expect(
        (await rawRequest(server.url, 'GET', '/stats', { ...auth, Host: 'ops.example.com' })).status,
      ).toBe(200);
      const page = await rawRequest(server.url, 'POST', `/commands/${id}/cancel`, {
        ...auth,
        Origin: 'https://evil.example',
      });
      expect(errorCode(page)).toBe('ORIGIN_NOT_ALLOWED');
      expect((await store.get(id))?.status).toBe('PENDING');
      await api.post(`/commands/${id}/cancel`);
      for (const bad of [
        { allowedOrigins: ['not a url'] },
        { allowedOrigins: ['https://a.example/path'] },
        { allowedHosts: [''] },
        { allowedHosts: ['a b'] },
        { allowedHosts: 'ops.internal' },
      ]) {
        const options = { store, auth: 'none', ...bad } as unknown as AdminHandlerOptions;
        expect(
          thrownCode(() => createAdminHandler(options)),
          JSON.stringify(bad),
        ).toBe('INVALID_ARGUMENT');
      }
    });

    it('running without authentication is asked for by name, and the start-up line says so', async () => {
      const unset: Record<string, unknown>[] = [
        {},
        { token: undefined },
        { token: null },
        { token: 42 },
        { auth: 'nobody' },
        { auth: 'none', token: TOKEN },
      ];
      for (const auth of unset) {
        const options = { store, ...auth } as unknown as AdminServerOptions;
        await expect(startAdminServer(options), JSON.stringify(auth)).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
        });
        expect(
          thrownCode(() => createAdminHandler(options)),
          JSON.stringify(auth),
        ).toBe('INVALID_ARGUMENT');
      }
      const open = recordingLogger();
      const unauthenticated = await startAdminServer({ store, auth: 'none', logger: open.logger });
      await unauthenticated.close();
      const [line] = open.entries;
      expect(line?.msg).toContain(unauthenticated.url);
      expect(line?.msg).toMatch(/unauthenticated/i);
      expect(line?.level).toBe('warn');
      const guarded = recordingLogger();
      const withToken = await startAdminServer({ store, token: TOKEN, logger: guarded.logger });
      await withToken.close();
      expect(guarded.entries[0]?.msg).toContain(withToken.url);
      expect(guarded.entries[0]?.msg).toContain('bearer token');
      expect(guarded.entries[0]?.msg).not.toMatch(/unauthenticated/i);
    });

    it('refuses a malformed port, host, prefix or status path with a typed error', async () => {
      for (const port of ['abc', -1, 65_536, 1.5, Number.NaN, '8080', null]) {
        const options = { store, token: TOKEN, port } as unknown as AdminServerOptions;
        await expect(startAdminServer(options), String(port)).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: expect.stringContaining('port'),
        });
      }
      for (const host of ['', 42]) {
        const options = { store, token: TOKEN, host } as unknown as AdminServerOptions;
        await expect(startAdminServer(options), String(host)).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
        });
      }
      for (const prefix of ['/../x', '/a/../b', '/./x', '/..', 'ops', '/a b', 42]) {
        for (const key of ['prefix', 'linkBase']) {
          const options = { store, token: TOKEN, [key]: prefix } as unknown as AdminHandlerOptions;
          expect(
            thrownCode(() => createAdminHandler(options)),
            `${key} ${String(prefix)}`,
          ).toBe('INVALID_ARGUMENT');
        }
      }
      expect(thrownCode(() => statusPath('abc'))).toBe('INVALID_ID');
      expect(thrownCode(() => statusPath('0'))).toBe('INVALID_ID');
      expect(thrownCode(() => statusPath('42', '/../x'))).toBe('INVALID_ARGUMENT');
      expect(thrownCode(() => statusPath('42', 7 as unknown as string))).toBe('INVALID_ARGUMENT');
      expect(statusPath('42', '/ops/')).toBe('/ops/commands/42');
    });

    it('can make the status resource (and metrics) public while mutations stay guarded', async () => {
      const open = await startAdminServer({
        store,
        token: TOKEN,
        publicStatus: { secret: STATUS_SECRET },
        publicMetrics: true,
      });
      try {
        const anon = client(open.url);
        const id = await submit(store, 'public.t');
        expect((await anon.get(publicStatusPath(id, { secret: STATUS_SECRET }))).status).toBe(200);
        expect((await anon.get('/metrics')).status).toBe(200);
        expect((await anon.get(`/commands/${id}`)).status).toBe(401);
        expect((await anon.get('/commands')).status).toBe(401);
        expect((await anon.post(`/commands/${id}/cancel`)).status).toBe(401);
      } finally {
        await open.close();
      }
    });

    it('public status: an unguessable reference, no error text; by id it stays behind the token', async () => {
      const open = await startAdminServer({ store, token: TOKEN, publicStatus: { secret: STATUS_SECRET } });
      try {
        const anon = client(open.url);
        const dead = await makeDead(
          store,
          'public.ref',
          'connect to postgres://billing:hunter2@db.internal/x',
        );
        const path = publicStatusPath(dead, { secret: STATUS_SECRET });
        expect(path).toMatch(new RegExp(`^/status/${dead}\\.[A-Za-z0-9_-]{22}$`));
        const seen = await anon.get(path);
        expect(seen.status).toBe(200);
        expect(seen.body).toMatchObject({
          type: 'public.ref',
          status: 'DEAD',
          operation: 'follow_up_failed',
          terminal: true,
          attempts: { failed: 1, maxRetry: 0 },
          links: { self: path },
        });
        expect(seen.text).not.toContain('hunter2');
        for (const key of ['id', 'lastError', 'owner', 'bizKey', 'payload'])
          expect(seen.body, key).not.toHaveProperty(key);
        expect((await anon.get(`/commands/${dead}`)).status).toBe(401);
        const byId = await client(open.url, TOKEN).get(`/commands/${dead}`);
        expect((byId.body as StatusBody).lastError).toContain('hunter2');

        // Counting does not reach other commands: a neighbour's id with this tag, a bare id, a
        // forged or foreign tag all answer the same 404.
        const neighbour = await submit(store, 'public.ref');
        const tag = path.slice(path.indexOf('.') + 1);
        const foreign = publicStatusPath(dead, { secret: `${STATUS_SECRET}-other` });
        const notFound: Answer[] = [];
        for (const guess of [
          `/status/${neighbour}.${tag}`,
          `/status/${dead}`,
          `/status/${dead}.${'A'.repeat(22)}`,
          `/status/${dead}.${tag}A`,
          `/status/abc`,
          foreign,
        ]) {
          notFound.push(await anon.get(guess));
        }
        for (const a of notFound) {
          expect(a.status).toBe(404);
          expect(a.body).toEqual({ error: { code: 'NOT_FOUND', message: 'no such status resource' } });
        }
        await client(open.url, TOKEN).post(`/commands/${neighbour}/cancel`);
        await client(open.url, TOKEN).post(`/commands/${dead}/kill`);
      } finally {
        await open.close();
      }

      // The link an application builds for its 202 resolves where the handler is mounted.
      const app = await serve(
        createAdminHandler({ store, token: TOKEN, prefix: '/ops', publicStatus: { secret: STATUS_SECRET } }),
      );
      try {
        const id = await submit(store, 'public.ref');
        const location = publicStatusPath(id, { secret: STATUS_SECRET, basePath: '/ops' });
        const a = await client(app.url).get(location);
        expect(a.status).toBe(200);
        expect(a.body).toMatchObject({ status: 'PENDING', operation: 'accepted', links: { self: location } });
        expect(a.headers.get('retry-after')).toBe('2');
        await client(app.url, TOKEN).post(`/ops/commands/${id}/cancel`);
      } finally {
        await app.close();
      }

      // A yes/no is no longer enough, and a short secret is refused.
      for (const publicStatus of [true, { secret: 'short' }, { secret: 42 }, {}]) {
        const options = { store, token: TOKEN, publicStatus } as unknown as AdminHandlerOptions;
        expect(
          thrownCode(() => createAdminHandler(options)),
          JSON.stringify(publicStatus),
        ).toBe('INVALID_ARGUMENT');
      }
      expect(thrownCode(() => publicStatusPath('1', { secret: 'short' }))).toBe('INVALID_ARGUMENT');
      expect(thrownCode(() => publicStatusPath('abc', { secret: STATUS_SECRET }))).toBe('INVALID_ID');
      expect(thrownCode(() => publicStatusPath('1', { secret: STATUS_SECRET, basePath: '/../x' }))).toBe(
        'INVALID_ARGUMENT',
      );
    });

    it("public workflow status: an opaque reference, every step's state, progress and order, no error text, ids or payloads", async () => {
      const hidden = await startAdminServer({ store, token: TOKEN, publicStatus: { secret: STATUS_SECRET } });
      const shown = await startAdminServer({
        store,
        token: TOKEN,
        publicStatus: { secret: STATUS_SECRET, result: true },
      });
      const type = 'public.wf';
      const workflowId = `order o-77 for billing@example.com ${Math.random().toString(36).slice(2, 6)}`;
      const outside = await submit(store, type);
      const ids = await submitWorkflow(store, workflowId, [
        { name: 'charge', type },
        { name: 'reserve', type, dependsOn: ['charge'] },
        { name: 'notify', type, dependsOn: [{ step: 'charge', onFailure: 'continue' }] },
        { name: 'ship', type, dependsOn: ['reserve', 'notify', { id: outside }] },
      ]);
      const charged = await claim(store, ids.charge!);
      await store.complete([{ id: charged.id, token: charged.claimToken, resultJson: '{"receipt":"R-1"}' }]);
      const reserving = await claim(store, ids.reserve!);
      await store.reportProgress([{ id: reserving.id, token: reserving.claimToken, done: 1, total: 4 }]);
      // Notify goes DEAD with a secret in its error; ship, waiting for it, is cancelled.
      await failLastAttempt(store, ids.notify!, 'smtp://mailer:s3cret@relay.internal refused');
      try {
        const path = publicWorkflowStatusPath(workflowId, { secret: STATUS_SECRET });
        expect(path).toMatch(/^\/status\/workflows\/[A-Za-z0-9_-]+$/);
        expect(path).not.toMatch(/o-77|billing/);
        expect(publicWorkflowStatusPath(workflowId, { secret: STATUS_SECRET })).toBe(path);
        const seen = await client(hidden.url).get(path);
        expect(seen.status).toBe(200);
        expect(seen.headers.get('retry-after')).toBe('2');
        expect(seen.body).toEqual({
          reference: path.slice('/status/workflows/'.length),
          operation: 'processing',
          terminal: false,
          // Three steps finished, and a quarter of the fourth.
          progress: { done: 3, total: 4, fraction: 0.8125 },
          steps: [
            {
              name: 'charge',
              type,
              status: 'SUCCESS',
              operation: 'completed',
              terminal: true,
              progress: null,
              dependsOn: [],
            },
            {
              name: 'reserve',
              type,
              status: 'RUNNING',
              operation: 'processing',
              terminal: false,
              progress: { done: 1, total: 4 },
              dependsOn: ['charge'],
            },
            {
              name: 'notify',
              type,
              status: 'DEAD',
              operation: 'follow_up_failed',
              terminal: true,
              progress: null,
              dependsOn: ['charge'],
            },
            {
              name: 'ship',
              type,
              status: 'CANCELLED',
              operation: 'cancelled',
              terminal: true,
              progress: null,
              // The command outside the workflow is not named.
              dependsOn: ['reserve', 'notify'],
            },
          ],
          links: { self: path },
        });
        for (const secret of ['s3cret', 'o-77', 'R-1']) expect(seen.text).not.toContain(secret);
        // Ids are small numbers on a fresh database: looked for as the JSON strings an id would be
        // written as, outside the reference (random text, which may hold any digit).
        const withoutReference = seen.text.replace(path.slice('/status/workflows/'.length), '');
        for (const id of [outside, ids.charge!]) expect(withoutReference).not.toContain(JSON.stringify(id));
        const withResults = (await client(shown.url).get(path)).body as { steps: { result: unknown }[] };
        expect(withResults.steps.map((s) => s.result)).toEqual([{ receipt: 'R-1' }, null, null, null]);

        // Behind the token by id; a forged, altered, foreign or missing reference answers one 404.
        expect((await client(hidden.url).get(`/workflows/${encodeURIComponent(workflowId)}`)).status).toBe(
          401,
        );
        const reference = path.slice('/status/workflows/'.length);
        const altered = `${reference.slice(0, 20)}${reference[20] === 'A' ? 'B' : 'A'}${reference.slice(21)}`;
        for (const guess of [
          `/status/workflows/${altered}`,
          `/status/workflows/${reference}A`,
          `/status/workflows/${reference.slice(0, -1)}`,
          '/status/workflows/abc',
          publicWorkflowStatusPath(workflowId, { secret: `${STATUS_SECRET}-other` }),
          publicWorkflowStatusPath('no-such-workflow', { secret: STATUS_SECRET }),
          `/status/workflows/${publicStatusPath(ids.charge!, { secret: STATUS_SECRET }).slice('/status/'.length)}`,
        ]) {
          const a = await client(hidden.url).get(guess);
          expect(a.status, guess).toBe(404);
          expect(a.body).toEqual({ error: { code: 'NOT_FOUND', message: 'no such status resource' } });
        }

        await store.complete([{ id: reserving.id, token: reserving.claimToken }]);
        const done = await client(hidden.url).get(path);
        expect(done.body).toMatchObject({
          operation: 'follow_up_failed',
          terminal: true,
          progress: { done: 4, total: 4, fraction: 1 },
        });
        expect(done.headers.get('retry-after')).toBeNull();
      } finally {
        await hidden.close();
        await shown.close();
      }
      // Without publicStatus there is no such public route; with a prefix, the link resolves there.
      expect(
        (await api.anonymous.get(publicWorkflowStatusPath(workflowId, { secret: STATUS_SECRET }))).status,
      ).toBe(401);
      const app = await serve(
        createAdminHandler({ store, token: TOKEN, prefix: '/ops', publicStatus: { secret: STATUS_SECRET } }),
      );
      try {
        const location = publicWorkflowStatusPath(workflowId, { secret: STATUS_SECRET, basePath: '/ops' });
        const a = await client(app.url).get(location);
        expect(a.status).toBe(200);
        expect(a.body).toMatchObject({ links: { self: location } });
      } finally {
        await app.close();
      }
      expect(thrownCode(() => publicWorkflowStatusPath('', { secret: STATUS_SECRET }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(thrownCode(() => publicWorkflowStatusPath('x'.repeat(129), { secret: STATUS_SECRET }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(thrownCode(() => publicWorkflowStatusPath('w', { secret: 'short' }))).toBe('INVALID_ARGUMENT');
      await killAllDead();
    });

    it('public status shows the result only with publicStatus.result: true', async () => {
      const withResult = { secret: STATUS_SECRET, result: true };
      const hidden = await startAdminServer({ store, token: TOKEN, publicStatus: { secret: STATUS_SECRET } });
      const shown = await startAdminServer({ store, token: TOKEN, publicStatus: withResult });
      try {
        const id = await submit(store, 'public.result');
        const path = publicStatusPath(id, { secret: STATUS_SECRET });
        expect((await client(shown.url).get(path)).body).toMatchObject({ status: 'PENDING', result: null });
        const c = await claim(store, id);
        const produced = { shipmentId: 'SHP-88' };
        await store.complete([{ id: c.id, token: c.claimToken, resultJson: JSON.stringify(produced) }]);

        const open = await client(shown.url).get(path);
        expect(open.body).toMatchObject({ status: 'SUCCESS', terminal: true, result: produced });
        const closed = await client(hidden.url).get(path);
        expect(closed.body).toMatchObject({ status: 'SUCCESS', terminal: true });
        expect(closed.body).not.toHaveProperty('result');
        expect(closed.text).not.toContain('SHP-88');

        // Shown results or not, a failure's text stays out of the public view.
        const dead = await makeDead(store, 'public.result', 'smtp://mailer:s3cret@relay.internal refused');
        const deadView = await client(shown.url).get(publicStatusPath(dead, { secret: STATUS_SECRET }));
        expect(deadView.body).toMatchObject({ status: 'DEAD', result: null });
        expect(deadView.text).not.toContain('s3cret');
        await client(shown.url, TOKEN).post(`/commands/${dead}/kill`);
      } finally {
        await hidden.close();
        await shown.close();
      }
      for (const result of ['yes', 1, null, {}]) {
        const publicStatus = { secret: STATUS_SECRET, result };
        const options = { store, token: TOKEN, publicStatus } as unknown as AdminHandlerOptions;
        expect(
          thrownCode(() => createAdminHandler(options)),
          JSON.stringify(result),
        ).toBe('INVALID_ARGUMENT');
      }
    });

    it('refuses to listen on a non-loopback address without a token', async () => {
      for (const host of ['0.0.0.0', '::', '192.0.2.10']) {
        await expect(startAdminServer({ store, host, auth: 'none' })).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: expect.stringContaining('without a token'),
        });
      }
      await expect(startAdminServer({ store, host: '0.0.0.0', token: 'short' })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      const withToken = await startAdminServer({ store, host: '0.0.0.0', token: TOKEN });
      await withToken.close();
      const local = await startAdminServer({ store, auth: 'none' });
      expect((await client(local.url).get('/stats')).status).toBe(200);
      await local.close();
    });

    it('is DOWN (503) while a dead letter exists, and UP again after kill or retry', async () => {
      await killAllDead();
      const up = await api.anonymous.get('/health');
      expect(up.status).toBe(200);
      expect(up.body).toMatchObject({
        status: 'UP',
        reasons: [],
        checks: { database: 'UP', deadLetters: 0 },
      });

      const dead = await makeDead(store, 'health.t');
      const down = await api.anonymous.get('/health');
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({
        status: 'DOWN',
        reasons: [{ code: 'DEAD_LETTERS', message: '1 dead letter(s) need a person' }],
        checks: { database: 'UP', deadLetters: 1 },
      });

      expect((await api.post(`/commands/${dead}/kill`)).status).toBe(200);
      expect((await api.anonymous.get('/health')).status).toBe(200);

      const dead2 = await makeDead(store, 'health.t');
      expect((await api.anonymous.get('/health')).status).toBe(503);
      expect((await api.post(`/commands/${dead2}/retry`)).status).toBe(200);
      expect((await api.anonymous.get('/health')).body).toMatchObject({ status: 'UP' });
      await api.post(`/commands/${dead2}/cancel`);
    });

    it('health: dead letters can be tolerated; an overdue backlog or an unreachable database is DOWN', async () => {
      const dead = await makeDead(store, 'health.cfg');
      const overdue = await submit(store, 'health.cfg', { runAt: new Date(Date.now() - 2 * 3_600_000) });
      const handler = createAdminHandler({
        store,
        auth: 'none',
        health: { deadLettersDown: false, maxPendingAgeMs: null },
      });
      const strict = createAdminHandler({
        store,
        auth: 'none',
        health: { deadLettersDown: false, maxPendingAgeMs: 30 * 60_000 },
      });
      const tolerant = await serve(handler);
      const backlog = await serve(strict);
      try {
        expect((await client(tolerant.url).get('/health')).body).toMatchObject({
          status: 'UP',
          checks: { deadLetters: 1 },
        });
        const late = await client(backlog.url).get('/health');
        expect(late.status).toBe(503);
        const [reason] = (late.body as HealthBody).reasons;
        expect(reason?.code).toBe('BACKLOG_TOO_OLD');
        expect(reason?.message).toContain('oldest due pending command has waited 2h');
      } finally {
        await tolerant.close();
        await backlog.close();
      }
      await api.post(`/commands/${dead}/kill`);
      await api.post(`/commands/${overdue}/cancel`);

      const unreachable = await db.unreachable();
      const gone = await serve(createAdminHandler({ store: unreachable, auth: 'none' }));
      try {
        const a = await client(gone.url).get('/health');
        expect(a.status).toBe(503);
        expect(a.body).toMatchObject({
          status: 'DOWN',
          reasons: [{ code: 'DATABASE_UNREACHABLE' }],
          checks: { database: 'DOWN', deadLetters: null },
        });
        // Other routes answer 500 without leaking driver text.
        const stats = await client(gone.url).get('/stats');
        expect(stats.status).toBe(500);
        expect(stats.body).toEqual({
          error: { code: 'INTERNAL', message: 'internal error (see the server log)' },
        });
      } finally {
        await gone.close();
        await unreachable.close().catch(() => undefined);
      }
    });

    it('public health names no type and carries no driver text; the detail goes to the log and to a caller with the token', async () => {
      const dead = await makeDead(store, 'secret.type.name');
      const anonymous = await api.anonymous.get('/health');
      expect(anonymous.status).toBe(503);
      expect(anonymous.text).not.toContain('secret.type.name');
      expect(errorCode(await api.anonymous.get('/commands'))).toBe('UNAUTHORIZED');
      await api.post(`/commands/${dead}/kill`);

      const unreachable = await db.unreachable();
      const driverText = await unreachable.now().then(
        () => '',
        (e: unknown) => describeFailure(e),
      );
      expect(driverText).not.toBe('');
      const log = recordingLogger();
      const gone = await startAdminServer({ store: unreachable, token: TOKEN, logger: log.logger });
      try {
        const a = await client(gone.url).get('/health');
        expect(a.status).toBe(503);
        expect(a.body).toMatchObject({
          status: 'DOWN',
          reasons: [{ code: 'DATABASE_UNREACHABLE', message: 'the database could not be read' }],
          checks: { database: 'DOWN', deadLetters: null, oldestPendingAgeMs: null },
        });
        expect((a.body as HealthBody).reasons[0]).not.toHaveProperty('detail');
        expect(a.text).not.toContain(driverText);
        const authed = await client(gone.url, TOKEN).get('/health');
        expect((authed.body as HealthBody).reasons[0]?.detail).toContain(driverText);
        const logged = log.entries.filter((e) => e.level === 'warn' && e.obj['err'] !== undefined);
        expect(logged.map((e) => describeFailure(e.obj['err'])).join()).toContain(driverText);
      } finally {
        await gone.close();
        await unreachable.close().catch(() => undefined);
      }
    });

    it('health: one cached answer per interval for every caller; concurrent probes share one query', async () => {
      await killAllDead();
      const counted = countingStore(store);
      const cached = await startAdminServer({
        store: counted.store,
        token: TOKEN,
        health: { cacheMs: 60_000 },
      });
      try {
        const answers = await Promise.all(
          Array.from({ length: 20 }, () => client(cached.url).get('/health')),
        );
        const stamps = new Set(answers.map((a) => (a.body as HealthBody).checkedAt));
        expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
        expect(stamps.size).toBe(1);
        expect(counted.calls.get('healthProbe')).toBe(1);
        expect(counted.calls.get('stats')).toBeUndefined();
        // Within the interval, a new dead letter shows at the next interval, not at the next caller.
        const dead = await makeDead(store, 'health.cache');
        const later = await client(cached.url).get('/health');
        expect(later.status).toBe(200);
        expect((later.body as HealthBody).checkedAt).toBe([...stamps][0]);
        expect(counted.calls.get('healthProbe')).toBe(1);
        await api.post(`/commands/${dead}/kill`);
      } finally {
        await cached.close();
      }

      // Without a cache, callers who arrive while a probe runs still wait for that one probe.
      const held = countingStore(store);
      let release = (): void => undefined;
      held.gate = new Promise<void>((resolve) => (release = resolve));
      const shared = await startAdminServer({ store: held.store, token: TOKEN, health: { cacheMs: 0 } });
      try {
        let arrived = 0;
        shared.server.on('request', () => (arrived += 1));
        const pending = Promise.all(Array.from({ length: 20 }, () => client(shared.url).get('/health')));
        while (arrived < 20) await new Promise((r) => setTimeout(r, 5));
        release();
        const answers = await pending;
        expect(new Set(answers.map((a) => (a.body as HealthBody).checkedAt)).size).toBe(1);
        expect(held.calls.get('healthProbe')).toBe(1);
        held.gate = null;
        await client(shared.url).get('/health');
        expect(held.calls.get('healthProbe')).toBe(2);
      } finally {
        await shared.close();
      }
      for (const cacheMs of [-1, 1.5, 'soon']) {
        const options = { store, token: TOKEN, health: { cacheMs } } as unknown as AdminHandlerOptions;
        expect(
          thrownCode(() => createAdminHandler(options)),
          String(cacheMs),
        ).toBe('INVALID_ARGUMENT');
      }
    });

    it('serves Prometheus text: commands by status from the store, counters and histograms from events', async () => {
      const dead = await makeDead(store, 'metrics.t');
      const ok = await claim(store, await submit(store, 'metrics.t'));
      await store.complete([{ id: ok.id, token: ok.claimToken }]);
      metrics.listener({ kind: 'claimed', command: ok, via: 'poll' });
      metrics.listener({ kind: 'started', command: ok, mode: 'SCHEDULED', runner: 'poll' });
      metrics.listener({ kind: 'succeeded', command: ok, durationMs: 42 });
      metrics.listener({ kind: 'retried', command: ok, durationMs: 7, error: 'x', nextRunAt: new Date() });
      metrics.listener({ kind: 'dead', command: ok, durationMs: 9, error: 'x' });
      metrics.listener({ kind: 'reclaimed', id: ok.id, type: 'metrics.t', dead: false });
      metrics.listener({ kind: 'fenced', command: ok, outcome: 'succeeded' });
      metrics.listener({ kind: 'round', claimed: 1, reclaimed: 0, durationMs: 3 });
      metrics.listener({ kind: 'submitted', id: ok.id, type: 'metrics.t', duplicate: false });
      metrics.listener({ kind: 'store-error', operation: 'claimDue', error: new Error('x') });

      const a = await api.get('/metrics');
      expect(a.status).toBe(200);
      expect(a.headers.get('content-type')).toContain('text/plain');
      const text = a.text;
      expect(text).toContain('asynccmd_commands{status="DEAD",type="metrics.t"} 1');
      expect(text).toContain('asynccmd_commands{status="SUCCESS",type="metrics.t"} 1');
      expect(text).toMatch(/^asynccmd_dead_letters [1-9]/m);
      expect(text).toContain('asynccmd_store_up 1');
      expect(text).toMatch(/^asynccmd_oldest_pending_age_seconds \d/m);
      expect(text).toContain('asynccmd_commands_claimed_total{type="metrics.t",via="poll"} 1');
      expect(text).toContain('asynccmd_commands_succeeded_total{type="metrics.t"} 1');
      expect(text).toContain('asynccmd_commands_retried_total{type="metrics.t"} 1');
      expect(text).toContain('asynccmd_commands_dead_total{type="metrics.t"} 1');
      expect(text).toContain('asynccmd_commands_reclaimed_total{type="metrics.t",outcome="pending"} 1');
      expect(text).toContain('asynccmd_commands_fenced_total{type="metrics.t"} 1');
      expect(text).toContain('asynccmd_store_errors_total{operation="claimDue"} 1');
      expect(text).toContain(
        'asynccmd_execution_duration_seconds_count{type="metrics.t",outcome="succeeded"} 1',
      );
      expect(text).toContain(
        'asynccmd_execution_duration_seconds_bucket{le="0.05",type="metrics.t",outcome="succeeded"} 1',
      );
      expect(text).toContain(
        'asynccmd_accept_to_terminal_seconds_count{type="metrics.t",outcome="succeeded"} 1',
      );
      expect(text).toContain('asynccmd_accept_to_terminal_seconds_count{type="metrics.t",outcome="dead"} 1');
      expect(text).toContain('asynccmd_claim_round_duration_seconds_count 1');

      await api.post(`/commands/${dead}/kill`);
      // The last dead letter of the type gone, its series reads 0: an alert on it resolves.
      const after = (await api.get('/metrics')).text;
      expect(after).toContain('asynccmd_commands{status="DEAD",type="metrics.t"} 0');
      expect(after).toContain('asynccmd_commands{status="CANCELLED",type="metrics.t"} 1');

      // A second instance in the same process registers the same names without clashing.
      const second = createMetrics({ store });
      expect(await second.metrics()).toContain('asynccmd_commands{');
      expect(second.registry).not.toBe(metrics.registry);
    });

    it('metrics say "unknown" rather than zero when the store cannot be read', async () => {
      const unreachable = await db.unreachable();
      try {
        const text = await createMetrics({ store: unreachable }).metrics();
        expect(text).toContain('asynccmd_store_up 0');
        // prom-client writes NaN as "Nan"; Prometheus parses either.
        expect(text).toMatch(/^asynccmd_dead_letters nan$/im);
        expect(text).not.toMatch(/^asynccmd_commands\{/m);
      } finally {
        await unreachable.close().catch(() => undefined);
      }
      // Without a store there are no store gauges at all, only the event-fed series.
      const eventsOnly = await createMetrics().metrics();
      expect(eventsOnly).not.toContain('asynccmd_store_up');
      expect(eventsOnly).toContain('# TYPE asynccmd_commands_succeeded_total counter');
    });

    it('pauses and resumes a type for every instance; hostile names travel percent-encoded', async (ctx) => {
      const pauses = store.typePauses;
      if (pauses === undefined) return ctx.skip();
      // Quotes, a slash (sent as %2F), a backslash, unicode: all one type, stored as given.
      const type = `erp."sync'/push\\ é✓`;
      const at = (name: string, action: string) => `/types/${encodeURIComponent(name)}/${action}`;
      await killAllDead();
      await submit(store, type);

      const paused = await api.post(at(type, 'pause'), { reason: 'the ERP is down' });
      expect(paused.status).toBe(200);
      expect(paused.body).toEqual({ type, paused: true, changed: true });
      // A second pause changes nothing: the first one's reason and time stay.
      expect((await api.post(at(type, 'pause'), { reason: 'again' })).body).toEqual({
        type,
        paused: true,
        changed: false,
      });
      const listed = await api.get('/types/paused');
      expect(listed.status).toBe(200);
      const item = (
        listed.body as { items: { type: string; pausedAt: string; reason: string }[] }
      ).items.find((i) => i.type === type);
      expect(item).toEqual({ type, pausedAt: expect.any(String), reason: 'the ERP is down' });
      expect(new Date(item?.pausedAt ?? '').toISOString()).toBe(item?.pausedAt);
      expect((await api.get('/stats')).body).toMatchObject({ pausedTypes: expect.arrayContaining([item]) });

      // A pause is a decision, not a fault: still UP. Names for the token only, the count for all.
      const health = await api.get('/health');
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ status: 'UP', pausedTypes: expect.arrayContaining([type]) });
      const anonymous = await api.anonymous.get('/health');
      expect(anonymous.status).toBe(200);
      expect((anonymous.body as HealthBody & { checks: { pausedTypes: number } }).checks.pausedTypes).toBe(
        (health.body as { pausedTypes: string[] }).pausedTypes.length,
      );
      expect(anonymous.text).not.toContain('erp.');

      // Prometheus escapes \ and " in label values.
      const label = type.replaceAll('\\', '\\\\').replaceAll('"', '\\"');
      expect((await api.get('/metrics')).text).toContain(`asynccmd_type_paused{type="${label}"} 1`);

      const resumed = await api.post(at(type, 'resume'));
      expect(resumed.body).toEqual({ type, paused: false, changed: true });
      expect((await api.post(at(type, 'resume'))).body).toEqual({ type, paused: false, changed: false });
      expect((await pauses.list()).map((p) => p.type)).not.toContain(type);
      // Resumed, its series reads 0: an alert on a long pause resolves.
      expect((await api.get('/metrics')).text).toContain(`asynccmd_type_paused{type="${label}"} 0`);
      await api.post(at('a/b', 'pause'));
      expect((await pauses.list()).map((p) => p.type)).toContain('a/b');
      await api.post(at('a/b', 'resume'));
    });

    it('GET /stats and /metrics show each rate limit with the tokens its bucket holds now', async () => {
      const type = `ops.rated.${Math.random().toString(36).slice(2, 8)}`;
      await store.rateLimits?.declare([{ type, maxStarts: 60, periodMs: 60_000, burst: 6 }]);
      const stats = (await api.get('/stats')).body as { rateLimits: { type: string; tokens: number }[] };
      expect(stats.rateLimits).toContainEqual({ type, maxStarts: 60, periodMs: 60_000, burst: 6, tokens: 6 });
      expect((await api.get('/metrics')).text).toContain(`asynccmd_rate_limit_tokens{type="${type}"} 6`);
    });

    it('POST /rate-limits/:type changes a rate limit for every instance; a bad one is 400 and changes nothing', async () => {
      const type = `ops.set.${Math.random().toString(36).slice(2, 8)}`;
      const at = `/rate-limits/${encodeURIComponent(type)}`;
      const set = await api.post(at, { maxStarts: 30, periodMs: 1_000, burst: 3 });
      expect(set.status).toBe(200);
      expect(set.body).toEqual({ type, maxStarts: 30, periodMs: 1_000, burst: 3, tokens: 3 });
      expect((await store.rateLimits?.list())?.find((l) => l.type === type)).toMatchObject({ maxStarts: 30 });
      for (const body of [
        { maxStarts: 0, periodMs: 1_000 },
        { maxStarts: 30 },
        { maxStarts: 30, periodMs: 1_000, rate: 1 },
      ]) {
        const refused = await api.post(at, body);
        expect(refused.status, JSON.stringify(body)).toBe(400);
        expect((refused.body as { error: { code: string } }).error.code).toBe('INVALID_ARGUMENT');
      }
      expect((await store.rateLimits?.list())?.find((l) => l.type === type)).toMatchObject({
        maxStarts: 30,
        burst: 3,
      });
      expect((await api.anonymous.post(at, { maxStarts: 30, periodMs: 1_000 })).status).toBe(401);
    });

    it('GET /stats and /metrics show the keys waiting of a keyed type: how many, at their limit, the busiest', async () => {
      const type = `ops.keyed.${Math.random().toString(36).slice(2, 8)}`;
      await store.keyLimits.declare([{ type, keyField: 'tenant', maxRunning: 3 }]);
      // Tenant a: 3 running (its limit) and 1 due; tenant b: 1 running, none due.
      const ids = [];
      for (const tenant of ['a', 'a', 'a', 'a', 'b'])
        ids.push(await submit(store, type, { payload: { tenant } }));
      for (const id of [ids[0]!, ids[1]!, ids[2]!, ids[4]!]) await claim(store, id);
      await untilDatabaseClockPasses(store, new Date());
      const stats = (await api.get('/stats')).body as { keysWaiting: unknown[] };
      expect(stats.keysWaiting).toContainEqual({
        type,
        keys: 1,
        atLimit: 1,
        top: [{ key: 'a', due: 1, running: 3 }],
      });
      const text = (await api.get('/metrics')).text;
      expect(text).toContain(`asynccmd_key_limit_max_running{type="${type}"} 3`);
      expect(text).toContain(`asynccmd_keys_waiting{type="${type}"} 1`);
      expect(text).toContain(`asynccmd_keys_at_limit{type="${type}"} 1`);
      expect(text).toContain(`asynccmd_key_running_most{type="${type}"} 3`);
    });

    it('POST /key-limits/:type and /key-rate-limits/:type change a limit per key for every instance; a bad one is 400 and changes nothing', async () => {
      const type = `ops.keyset.${Math.random().toString(36).slice(2, 8)}`;
      const keyed = `/key-limits/${encodeURIComponent(type)}`;
      await store.keyLimits.declare([{ type, keyField: 'tenant', maxRunning: 3 }]);
      // The stored key field stays unless the change names one.
      const set = await api.post(keyed, { maxRunning: 5 });
      expect(set.status).toBe(200);
      expect(set.body).toEqual({ type, keyField: 'tenant', maxRunning: 5 });
      expect((await api.post(keyed, { maxRunning: 4, key: 'customerId' })).body).toEqual({
        type,
        keyField: 'customerId',
        maxRunning: 4,
      });
      // Weights alone keep the limit and the key; `{}` drops them.
      expect((await api.post(keyed, { weights: { acme: 3 } })).body).toEqual({
        type,
        keyField: 'customerId',
        maxRunning: 4,
        weights: { acme: 3 },
      });
      expect((await api.post(keyed, { maxRunning: 4 })).body).toMatchObject({ weights: { acme: 3 } });
      expect((await api.post(keyed, { weights: {} })).body).toEqual({
        type,
        keyField: 'customerId',
        maxRunning: 4,
      });
      const other = `/key-limits/${encodeURIComponent(`${type}.none`)}`;
      for (const [at, body] of [
        [keyed, { maxRunning: 0 }],
        [keyed, { maxRunning: 2, key: 'a.b' }],
        [keyed, { maxRunning: 2, limit: 1 }],
        [keyed, { weights: { acme: 0 } }],
        [keyed, { weights: [3] }],
        [keyed, { weights: { acme: 1_001 } }],
        // No stored limit to take the key field (or the limit) from.
        [other, { maxRunning: 2 }],
        [other, { key: 'tenant' }],
        // A type with a key limit takes no rate limit per key.
        [`/key-rate-limits/${encodeURIComponent(type)}`, { maxStarts: 10, periodMs: 1_000, key: 'tenant' }],
      ] as const) {
        const refused = await api.post(at, body);
        expect(refused.status, `${at} ${JSON.stringify(body)}`).toBe(400);
        expect((refused.body as { error: { code: string } }).error.code).toBe('INVALID_ARGUMENT');
      }
      expect((await store.keyLimits.list()).filter((l) => l.type.startsWith(type))).toEqual([
        { type, keyField: 'customerId', maxRunning: 4 },
      ]);
      expect((await store.keyRateLimits.list()).find((l) => l.type === type)).toBeUndefined();

      const rated = `${type}.rated`;
      const at = `/key-rate-limits/${encodeURIComponent(rated)}`;
      expect((await api.post(at, { maxStarts: 10, periodMs: 1_000, key: 'tenant' })).body).toEqual({
        type: rated,
        keyField: 'tenant',
        maxStarts: 10,
        periodMs: 1_000,
        burst: 1,
      });
      expect((await api.post(at, { maxStarts: 20, periodMs: 2_000, burst: 4 })).body).toEqual({
        type: rated,
        keyField: 'tenant',
        maxStarts: 20,
        periodMs: 2_000,
        burst: 4,
      });
      expect((await api.post(at, { maxStarts: 20, periodMs: 2_000, burst: 20 })).status).toBe(400);
      expect((await store.keyRateLimits.list()).find((l) => l.type === rated)).toMatchObject({ burst: 4 });
      expect((await api.anonymous.post(keyed, { maxRunning: 2 })).status).toBe(401);
    });

    it('type pauses: with scheduleTypes, a type outside them is UNKNOWN_COMMAND_TYPE (400) and writes nothing; any resumes', async (ctx) => {
      const pauses = store.typePauses;
      if (pauses === undefined) return ctx.skip();
      const knowing = await startAdminServer({ store, token: TOKEN, scheduleTypes: ['t.known'] });
      try {
        const known = client(knowing.url, TOKEN);
        const before = await pauses.list();
        const typo = await known.post('/types/t.knwon/pause', { reason: 'a typo' });
        expect(typo.status).toBe(400);
        expect(errorCode(typo)).toBe('UNKNOWN_COMMAND_TYPE');
        expect(typo.text).toContain('t.known');
        expect(await pauses.list()).toEqual(before);
        expect((await known.post('/types/t.known/pause')).body).toEqual({
          type: 't.known',
          paused: true,
          changed: true,
        });
        // One paused where types are not known (the CLI, a handler without scheduleTypes) can be lifted here.
        await api.post('/types/t.elsewhere/pause');
        expect((await known.post('/types/t.elsewhere/resume')).body).toMatchObject({ changed: true });
        await known.post('/types/t.known/resume');
      } finally {
        await knowing.close();
      }
    });

    it('type pauses: bad input is a 400 and writes nothing; the usual auth, JSON and Origin rules hold', async (ctx) => {
      const pauses = store.typePauses;
      if (pauses === undefined) return ctx.skip();
      const before = await pauses.list();
      const bad: [string, unknown][] = [
        ['/types/t.ok/pause', { reason: 5 }],
        ['/types/t.ok/pause', { reason: '' }],
        ['/types/t.ok/pause', { reason: 'x'.repeat(1_001) }],
        ['/types/t.ok/pause', { reason: 'a\u0000b' }],
        ['/types/t.ok/pause', { reason: 'why', until: 'tomorrow' }],
        ['/types/t.ok/pause', [1]],
        ['/types/t.ok/resume', { reason: 'why' }],
        // Not UTF-8 once decoded: refused, not taken as the literal text.
        ['/types/t%E0%A4%A/pause', undefined],
        ['/types/%FF/pause', undefined],
        ['/types/a%00b/pause', undefined],
        [`/types/${'t'.repeat(129)}/pause`, undefined],
      ];
      for (const [path, body] of bad) {
        const a = await api.post(path, body);
        expect(a.status, path).toBe(400);
        expect(errorCode(a), path).toBe('INVALID_ARGUMENT');
      }
      expect((await api.post('/types/t.ok/pause', 'not json')).status).toBe(400);
      expect(await pauses.list()).toEqual(before);

      const json = { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' };
      for (const path of ['/types/t.ok/pause', '/types/t.ok/resume']) {
        expect(errorCode(await api.anonymous.post(path)), path).toBe('UNAUTHORIZED');
        expect((await api.post(path, undefined, `${TOKEN}-wrong`)).status).toBe(401);
        const typed = await rawRequest(server.url, 'POST', path, { ...json, 'Content-Type': 'text/plain' });
        expect(errorCode(typed), path).toBe('UNSUPPORTED_MEDIA_TYPE');
        const foreign = await rawRequest(server.url, 'POST', path, {
          ...json,
          Origin: 'http://evil.example',
        });
        expect(errorCode(foreign), path).toBe('ORIGIN_NOT_ALLOWED');
        expect((await api.get(path)).status).toBe(405);
      }
      expect(errorCode(await api.anonymous.get('/types/paused'))).toBe('UNAUTHORIZED');
      expect((await api.post('/types/paused')).status).toBe(405);
      expect((await api.get('/types/t.ok')).status).toBe(404);
      expect(await pauses.list()).toEqual(before);

      // A database failure is a 500 in our words; the driver's stay in the log.
      const unreachable = await db.unreachable();
      const log = recordingLogger();
      const gone = await startAdminServer({ store: unreachable, token: TOKEN, logger: log.logger });
      try {
        for (const [method, path] of [
          ['POST', '/types/t.ok/pause'],
          ['GET', '/types/paused'],
        ] as const) {
          const a = await client(gone.url, TOKEN).call(method, path);
          if (unreachable.typePauses === undefined) continue;
          expect(a.status, path).toBe(500);
          expect(a.body).toEqual({
            error: { code: 'INTERNAL', message: 'internal error (see the server log)' },
          });
        }
      } finally {
        await gone.close();
        await unreachable.close().catch(() => undefined);
      }
    });

    it('a store that keeps no type pauses: the mutations are a 400 saying so, the list is empty', async () => {
      const without = new Proxy(store, {
        get: (target, property) => {
          if (property === 'typePauses') return undefined;
          const value: unknown = Reflect.get(target, property);
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      const own = await startAdminServer({ store: without, token: TOKEN });
      try {
        const ownApi = client(own.url, TOKEN);
        const a = await ownApi.post('/types/t.ok/pause');
        expect(a.status).toBe(400);
        expect(a.body).toEqual({
          error: { code: 'INVALID_ARGUMENT', message: `the ${store.dialect} store keeps no type pauses` },
        });
        expect((await ownApi.get('/types/paused')).body).toEqual({ items: [] });
        expect((await ownApi.get('/stats')).body).toMatchObject({ pausedTypes: [] });
        expect((await ownApi.get('/health')).body).toMatchObject({ pausedTypes: [] });
      } finally {
        await own.close();
      }
    });

    it('mounts into an existing app under a prefix and passes other requests on', async () => {
      const handler = createAdminHandler({ store, token: TOKEN, prefix: '/ops' });
      const app = await serve((req, res) =>
        handler(req, res, () => {
          res.writeHead(200, { 'Content-Type': 'text/plain' });
          res.end('the app');
        }),
      );
      try {
        const id = await submit(store, 'mount.t');
        const status = await client(app.url, TOKEN).get(`/ops/commands/${id}`);
        expect(status.status).toBe(200);
        expect((status.body as StatusBody).links.self).toBe(`/ops/commands/${id}`);
        expect((await client(app.url, TOKEN).get('/ops/health')).status).toBe(200);
        expect((await client(app.url).get('/orders/1')).text).toBe('the app');
        expect((await client(app.url).get('/opsx/commands')).text).toBe('the app');
        await client(app.url, TOKEN).post(`/ops/commands/${id}/cancel`);
      } finally {
        await app.close();
      }
    });
  });
}

/** Serves a handler on a free loopback port. */
async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => unknown,
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
