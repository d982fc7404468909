import type { CommandStore } from '@asynccmd/core';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminHandler,
  createMetrics,
  startAdminServer,
  type AdminServer,
  type CommandMetrics,
} from '../../src/ops/index.js';
import { client, errorCode } from './http-client.js';
import { claim, makeDead, submit, submitIdempotent, succeed } from './support.js';

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
      server = await startAdminServer({ store, token: TOKEN, metrics });
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
      expect(stats.byType['stats.a']).toEqual({ PENDING: 1, RUNNING: 0, SUCCESS: 1, DEAD: 0, CANCELLED: 0 });
      expect(stats.byType['stats.b']?.PENDING).toBe(1);
      expect(Object.keys(stats.byStatus)).toEqual(['PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED']);
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

    it('can make the status resource (and metrics) public while mutations stay guarded', async () => {
      const open = await startAdminServer({ store, token: TOKEN, publicStatus: true, publicMetrics: true });
      try {
        const anon = client(open.url);
        const id = await submit(store, 'public.t');
        expect((await anon.get(`/commands/${id}`)).status).toBe(200);
        expect((await anon.get('/metrics')).status).toBe(200);
        expect((await anon.get('/commands')).status).toBe(401);
        expect((await anon.post(`/commands/${id}/cancel`)).status).toBe(401);
      } finally {
        await open.close();
      }
    });

    it('refuses to listen on a non-loopback address without a token', async () => {
      for (const host of ['0.0.0.0', '::', '192.0.2.10']) {
        await expect(startAdminServer({ store, host })).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: expect.stringContaining('without a token'),
        });
      }
      await expect(startAdminServer({ store, host: '0.0.0.0', token: 'short' })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      const withToken = await startAdminServer({ store, host: '0.0.0.0', token: TOKEN });
      await withToken.close();
      const local = await startAdminServer({ store });
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
      expect(down.body).toMatchObject({ status: 'DOWN', checks: { database: 'UP', deadLetters: 1 } });
      expect((down.body as { reasons: string[] }).reasons[0]).toContain(
        '1 dead letter(s) need a person (health.t: 1)',
      );

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
        health: { deadLettersDown: false, maxPendingAgeMs: null },
      });
      const strict = createAdminHandler({
        store,
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
        expect((late.body as { reasons: string[] }).reasons.join()).toContain(
          'oldest due pending command has waited 2h',
        );
      } finally {
        await tolerant.close();
        await backlog.close();
      }
      await api.post(`/commands/${dead}/kill`);
      await api.post(`/commands/${overdue}/cancel`);

      const unreachable = await db.unreachable();
      const gone = await serve(createAdminHandler({ store: unreachable }));
      try {
        const a = await client(gone.url).get('/health');
        expect(a.status).toBe(503);
        expect(a.body).toMatchObject({ status: 'DOWN', checks: { database: 'DOWN', deadLetters: null } });
        expect((a.body as { reasons: string[] }).reasons[0]).toMatch(/^database unreachable: /);
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
      const after = (await api.get('/metrics')).text;
      expect(after).not.toContain('asynccmd_commands{status="DEAD",type="metrics.t"}');
      expect(after).toContain('asynccmd_commands{status="CANCELLED",type="metrics.t"}');

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
