import { decideFailure, immediateBackoff, type CommandStore, LIMITS } from '@asynccmd/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpsDatabase } from '../../runtime/test/ops/admin-http.suite.js';
import {
  claim,
  makeDead,
  submit,
  submitIdempotent,
  submitTwoStepWorkflow,
  succeed,
  untilDatabaseClockPasses,
} from '../../runtime/test/ops/support.js';
import { cli } from './run.js';

/** The `asynccmd` CLI against one real database, reached by URL exactly as an operator would. */
export function describeCli(name: string, open: () => Promise<OpsDatabase>): void {
  describe(`asynccmd CLI on ${name}`, () => {
    let db: OpsDatabase;
    let store: CommandStore;
    const run = (...args: string[]) => cli(['--db', db.url, ...db.cliArgs, ...args]);

    beforeAll(async () => {
      db = await open();
      store = db.store;
    });
    afterAll(async () => {
      await db?.dispose();
    });

    it('migrate is idempotent and says what it did', async () => {
      const r = await run('migrate');
      expect(r).toMatchObject({ code: 0, err: '' });
      expect(r.out).toContain(`migrated: the ${store.dialect} command table is up to date`);
      expect(JSON.parse((await run('migrate', '--json')).out)).toEqual({
        migrated: true,
        dialect: store.dialect,
      });
    });

    it('stats: a human table, and --json for scripts', async () => {
      await submit(store, 'cli.stats');
      await makeDead(store, 'cli.stats');
      const human = await run('stats');
      expect(human.code).toBe(0);
      expect(human.out).toMatch(/^TYPE\s+WAITING\s+PENDING\s+RUNNING\s+SUCCESS\s+DEAD\s+CANCELLED$/m);
      expect(human.out).toMatch(/^cli\.stats\s+0\s+1\s+0\s+0\s+1\s+0$/m);
      expect(human.out).toContain('oldest due pending: waiting');
      const json = JSON.parse((await run('stats', '--json')).out);
      expect(json.byType['cli.stats']).toEqual({
        WAITING: 0,
        PENDING: 1,
        RUNNING: 0,
        SUCCESS: 0,
        DEAD: 1,
        CANCELLED: 0,
      });
      expect(json.byStatus.DEAD).toBeGreaterThanOrEqual(1);
    });

    it('workflow show ID prints every step, --json the resource; workflow cancel; an unknown id exits 1', async () => {
      const id = `wf-cli-${Math.random().toString(36).slice(2, 8)}`;
      const { a, b } = await submitTwoStepWorkflow(store, id, 'cli.wf');
      const human = await run('workflow', 'show', id);
      expect(human).toMatchObject({ code: 0, err: '' });
      expect(human.out).toContain(`workflow ${id}: accepted, 0 of 2 step(s) finished`);
      expect(human.out).toMatch(new RegExp(`^a\\s+${a}\\s+cli\\.wf\\s+PENDING\\s+accepted`, 'm'));
      expect(human.out).toMatch(new RegExp(`^b\\s+${b}\\s+cli\\.wf\\s+WAITING\\s+accepted`, 'm'));
      expect(human.out).toMatch(/^STEP\s+ID\s+TYPE\s+STATUS\s+STATE\s+PROGRESS\s+AFTER\s+LAST ERROR$/m);
      const json = JSON.parse((await run('workflow', 'show', id, '--json')).out);
      expect(json).toMatchObject({ id, progress: { done: 0, total: 2, fraction: 0 } });
      expect(json.steps[1].dependsOn).toEqual([{ step: 'a', id: a, onFailure: 'cancel' }]);
      // A step's progress, in its row and in the workflow's figure; its command names the workflow.
      const running = await claim(store, a);
      await store.reportProgress([{ id: a, token: running.claimToken, done: 1, total: 4 }]);
      const during = await run('workflow', 'show', id);
      expect(during.out).toContain(`workflow ${id}: processing, 0 of 2 step(s) finished, 12% done`);
      expect(during.out).toMatch(
        new RegExp(`^a\\s+${a}\\s+cli\\.wf\\s+RUNNING\\s+processing\\s+1 of 4 \\(25%\\)`, 'm'),
      );
      expect(during.out).toMatch(new RegExp(`^b\\s+${b}\\s+cli\\.wf\\s+WAITING\\s+accepted\\s+-\\s+a$`, 'm'));
      const shown = await run('show', a);
      expect(shown.out).toMatch(/^progress\s+1 of 4 \(25%\)$/m);
      expect(shown.out).toMatch(new RegExp(`^workflow\\s+${id} \\(step a\\)$`, 'm'));
      expect(JSON.parse((await run('show', a, '--json')).out)).toMatchObject({
        progress: { done: 1, total: 4 },
        workflow: { workflowId: id, step: 'a' },
      });
      await store.complete([{ id: a, token: running.claimToken }]);
      expect((await run('workflow', 'show', 'no-such-workflow')).code).toBe(1);
      const cancelled = await run('workflow', 'cancel', id, '--reason', 'withdrawn');
      expect(cancelled).toMatchObject({ code: 0, err: '' });
      expect(cancelled.out).toContain(`workflow ${id}: cancelled 1 step(s), now cancelled`);
    });

    it('stats prints the stored type limits beside what runs of each type', async () => {
      await store.typeLimits?.declare([{ type: 'cli.limited', maxRunning: 3 }]);
      await claim(store, await submit(store, 'cli.limited'));
      const human = await run('stats');
      expect(human.code).toBe(0);
      expect(human.out).toMatch(/^LIMITED TYPE\s+MAX RUNNING\s+RUNNING$/m);
      expect(human.out).toMatch(/^cli\.limited\s+3\s+1$/m);
      const json = JSON.parse((await run('stats', '--json')).out);
      expect(json.typeLimits).toContainEqual({ type: 'cli.limited', maxRunning: 3 });
    });

    it('stats prints the rate limits with their tokens now, and the limits per key', async () => {
      await store.rateLimits?.declare([{ type: 'cli.rated', maxStarts: 100, periodMs: 60_000, burst: 10 }]);
      await store.keyLimits?.declare([
        { type: 'cli.keyed', keyField: 'customerId', maxRunning: 5 },
        { type: 'cli.fair', keyField: 'tenant', maxRunning: LIMITS.keyLimit },
      ]);
      await store.keyRateLimits?.declare([
        { type: 'cli.keyrated', keyField: 'customerId', maxStarts: 10, periodMs: 1_000 },
      ]);
      await submit(store, 'cli.rated');
      const human = await run('stats');
      expect(human.code).toBe(0);
      expect(human.out).toMatch(/^RATE LIMITED TYPE\s+MAX STARTS\s+PER\s+BURST\s+TOKENS NOW\s+PENDING$/m);
      expect(human.out).toMatch(/^cli\.rated\s+100\s+1m\s+10\s+10\s+1$/m);
      expect(human.out).toMatch(/^cli\.keyed\s+customerId\s+5 running$/m);
      expect(human.out).toMatch(/^cli\.fair\s+tenant\s+fair share \(turns, no limit\)$/m);
      expect(human.out).toMatch(/^cli\.keyrated\s+customerId\s+10 starts per 1s \(burst \d+\)$/m);
      const json = JSON.parse((await run('stats', '--json')).out);
      expect(json.rateLimits).toContainEqual({
        type: 'cli.rated',
        maxStarts: 100,
        periodMs: 60_000,
        burst: 10,
        tokens: 10,
      });
      expect(json.keyLimits).toContainEqual({ type: 'cli.keyed', keyField: 'customerId', maxRunning: 5 });
      expect(json.keyRateLimits).toContainEqual(
        expect.objectContaining({ type: 'cli.keyrated', maxStarts: 10 }),
      );
    });

    it("rate-limit changes a type's rate limit in the store; a bad one exits 2 and changes nothing", async () => {
      const r = await run('rate-limit', 'cli.changed', '--max-starts', '60', '--per', '1m', '--burst', '5');
      expect(r).toMatchObject({ code: 0, err: '' });
      expect(r.out).toContain('type "cli.changed": at most 60 starts per 1m (burst 5), 5 token(s) now');
      expect((await store.rateLimits?.list())?.find((l) => l.type === 'cli.changed')).toMatchObject({
        maxStarts: 60,
        periodMs: 60_000,
        burst: 5,
      });
      const json = JSON.parse(
        (await run('rate-limit', 'cli.changed', '--max-starts', '30', '--per', '10s', '--json')).out,
      );
      expect(json).toMatchObject({ type: 'cli.changed', maxStarts: 30, periodMs: 10_000 });
      for (const bad of [
        ['--max-starts', '0', '--per', '1m'],
        ['--max-starts', '10', '--per', 'soon'],
        ['--max-starts', '10', '--per', '1m', '--burst', '10'],
      ]) {
        const refused = await run('rate-limit', 'cli.changed', ...bad);
        expect(refused.code, bad.join(' ')).toBe(2);
        expect(refused.err).toMatch(/^asynccmd: /);
      }
      expect((await store.rateLimits?.list())?.find((l) => l.type === 'cli.changed')).toMatchObject({
        maxStarts: 30,
      });
    });

    it('stats prints the keys waiting of each keyed type: how many, at their limit, the busiest', async () => {
      await store.keyLimits.declare([{ type: 'cli.waiting', keyField: 'tenant', maxRunning: 1 }]);
      const first = await submit(store, 'cli.waiting', { payload: { tenant: 'acme' } });
      await submit(store, 'cli.waiting', { payload: { tenant: 'acme' } });
      await submit(store, 'cli.waiting', { payload: { tenant: 'zeta' } });
      await claim(store, first);
      const human = await run('stats');
      expect(human.code).toBe(0);
      expect(human.out).toMatch(/^TYPE\s+KEYS WAITING\s+AT THEIR LIMIT\s+MOST RUNNING \(RUNNING \/ DUE\)$/m);
      expect(human.out).toMatch(/^cli\.waiting\s+2\s+1\s+acme 1\/1, zeta 0\/1$/m);
      const json = JSON.parse((await run('stats', '--json')).out);
      expect(json.keysWaiting).toContainEqual({
        type: 'cli.waiting',
        keys: 2,
        atLimit: 1,
        top: [
          { key: 'acme', due: 1, running: 1 },
          { key: 'zeta', due: 1, running: 0 },
        ],
      });
    });

    it('key-limit and key-rate-limit change a limit per key in the store; a bad one exits 2 and changes nothing', async () => {
      await store.keyLimits.declare([{ type: 'cli.perkey', keyField: 'tenant', maxRunning: 3 }]);
      const r = await run('key-limit', 'cli.perkey', '--max-running', '7');
      expect(r).toMatchObject({ code: 0, err: '' });
      expect(r.out).toContain('type "cli.perkey": at most 7 running per tenant');
      const json = JSON.parse(
        (await run('key-limit', 'cli.perkey', '--max-running', '2', '--key', 'orderId', '--json')).out,
      );
      expect(json).toEqual({ type: 'cli.perkey', keyField: 'orderId', maxRunning: 2 });
      // Weights alone: the limit and key stay; --no-weights drops them.
      const weighted = await run('key-limit', 'cli.perkey', '--weight', 'acme=3', '--weight', 'a=b=2');
      expect(weighted).toMatchObject({ code: 0, err: '' });
      expect(weighted.out).toContain('at most 2 running per orderId; weights "a=b"=2, "acme"=3');
      expect((await store.keyLimits.list()).find((l) => l.type === 'cli.perkey')?.weights).toEqual({
        'a=b': 2,
        acme: 3,
      });
      expect((await run('key-limit', 'cli.perkey', '--no-weights')).code).toBe(0);
      const rated = await run(
        'key-rate-limit',
        'cli.perkey.rated',
        '--max-starts',
        '10',
        '--per',
        '1s',
        '--key',
        'tenant',
      );
      expect(rated).toMatchObject({ code: 0, err: '' });
      expect(rated.out).toContain('type "cli.perkey.rated": at most 10 starts per 1s per tenant (burst 1)');
      for (const bad of [
        ['key-limit', 'cli.perkey', '--max-running', '0'],
        ['key-limit', 'cli.perkey', '--max-running', '2', '--key', 'a.b'],
        ['key-limit', 'cli.unknown.type', '--max-running', '2'],
        ['key-limit', 'cli.perkey', '--weight', 'acme'],
        ['key-limit', 'cli.perkey', '--weight', 'acme=0'],
        ['key-limit', 'cli.perkey', '--weight', '=3'],
        ['key-limit', 'cli.unknown.type', '--weight', 'acme=2', '--key', 'tenant'],
        ['key-rate-limit', 'cli.perkey', '--max-starts', '10', '--per', '1s'],
        ['key-rate-limit', 'cli.perkey.rated', '--max-starts', '10', '--per', '1s', '--burst', '10'],
      ]) {
        const refused = await run(...bad);
        expect(refused.code, bad.join(' ')).toBe(2);
        expect(refused.err).toMatch(/^asynccmd: /);
      }
      expect((await store.keyLimits.list()).find((l) => l.type === 'cli.perkey')).toEqual({
        type: 'cli.perkey',
        keyField: 'orderId',
        maxRunning: 2,
      });
      expect((await store.keyRateLimits.list()).find((l) => l.type === 'cli.perkey.rated')).toMatchObject({
        maxStarts: 10,
        burst: 1,
      });
    });

    it('list --status DEAD --type T: table and --json; bad filters exit 2', async () => {
      const dead = await makeDead(store, 'cli.list', 'payment gateway timed out');
      await submit(store, 'cli.list');
      const human = await run('list', '--status', 'DEAD', '--type', 'cli.list');
      expect(human.code).toBe(0);
      expect(human.out).toMatch(
        /^ID\s+STATUS\s+TYPE\s+BIZ KEY\s+PRIORITY\s+FAILED\s+NEXT RUN AT\s+LAST ERROR$/m,
      );
      expect(human.out).toMatch(
        new RegExp(`^${dead}\\s+DEAD\\s+cli\\.list\\s+0\\s+1/1\\s+\\S+\\s+payment gateway timed out$`, 'm'),
      );
      const json = JSON.parse((await run('list', '--status', 'dead', '--type', 'cli.list', '--json')).out);
      expect(json.items.map((i: { id: string }) => i.id)).toEqual([dead]);
      expect(json.items[0]).toMatchObject({ status: 'DEAD', operation: 'follow_up_failed' });
      expect(json.nextCursor).toBeNull();

      const paged = JSON.parse((await run('list', '--type', 'cli.list', '--limit', '1', '--json')).out);
      expect(paged.items).toHaveLength(1);
      const rest = JSON.parse(
        (await run('list', '--type', 'cli.list', '--cursor', paged.nextCursor, '--json')).out,
      );
      expect(rest.items.map((i: { id: string }) => i.id)).toEqual([dead]);

      expect((await run('list', '--type', 'cli.none')).out).toBe('no commands match\n');
      for (const bad of [
        ['--status', 'ZOMBIE'],
        ['--limit', '0'],
        ['--limit', 'many'],
      ]) {
        const r = await run('list', ...bad);
        expect(r.code, bad.join(' ')).toBe(2);
        expect(r.err).toMatch(/^asynccmd: /);
      }
      await run('kill', dead);
    });

    it('show ID prints everything, payload included; bad and unknown ids exit 2 and 1', async () => {
      const id = await submit(store, 'cli.show', {
        bizKey: 'order-9',
        payload: { orderId: 9, note: 'gift' },
      });
      const human = await run('show', id);
      expect(human.code).toBe(0);
      expect(human.out).toMatch(new RegExp(`^id\\s+${id}$`, 'm'));
      expect(human.out).toMatch(/^status\s+PENDING \(accepted\)$/m);
      expect(human.out).toMatch(/^progress\s+-$/m);
      expect(human.out).toMatch(/^workflow\s+-$/m);
      expect(human.out).toContain('"note": "gift"');
      expect(human.out).toMatch(
        /^attempts\s+0 failed, reclaimed after a lost lease 0 times; 3 of 3 retries left$/m,
      );
      expect(human.out).not.toContain('0x');
      const json = JSON.parse((await run('show', id, '--json')).out);
      expect(json).toMatchObject({
        id,
        bizKey: 'order-9',
        payload: { orderId: 9, note: 'gift' },
        headers: {},
      });

      const bad = await run('show', 'abc');
      expect(bad.code).toBe(2);
      expect(bad.err).toContain('is not a command id');
      // The attempts so far, one line each, oldest first.
      const c = await claim(store, id);
      await store.fail([
        {
          ref: { id, token: c.claimToken },
          outcome: decideFailure(c, 'ledger timeout', new Date(), immediateBackoff),
        },
      ]);
      await succeed(store, id);
      const history = await run('show', id);
      expect(history.out).toMatch(
        /^attempts\s+1 failed, reclaimed after a lost lease 0 times; 2 of 3 retries left$/m,
      );
      expect(history.out).toMatch(/^history\s+1\. failed, on -, \S+ → \S+: ledger timeout$/m);
      expect(history.out).toMatch(/^\s+2\. succeeded, on -, \S+ → \S+$/m);
      const shown = JSON.parse((await run('show', id, '--json')).out);
      expect(shown.history.map((a: { outcome: string }) => a.outcome)).toEqual(['failed', 'succeeded']);
      const unknown = await run('show', '987654321');
      expect(unknown.code).toBe(1);
      expect(unknown.err).toBe('asynccmd: command 987654321 does not exist\n');
    });

    it('show ID prints the result a success left, --json carries it; list --json leaves it out', async () => {
      const id = await submit(store, 'cli.result');
      const pending = await run('show', id);
      expect(pending.out).toMatch(/^result\s+-$/m);
      expect(JSON.parse((await run('show', id, '--json')).out)).toMatchObject({ result: null });

      const c = await claim(store, id);
      const produced = { shipmentId: 'SHP-7', labels: ['a4'] };
      await store.complete([{ id: c.id, token: c.claimToken, resultJson: JSON.stringify(produced) }]);
      const human = await run('show', id);
      expect(human.code).toBe(0);
      expect(human.out).toMatch(/^result\s+\{$/m);
      expect(human.out).toContain('"shipmentId": "SHP-7"');
      const json = JSON.parse((await run('show', id, '--json')).out);
      expect(json).toMatchObject({ id, status: 'SUCCESS', result: produced });

      const listed = JSON.parse((await run('list', '--type', 'cli.result', '--json')).out);
      expect(listed.items.map((i: { id: string }) => i.id)).toEqual([id]);
      expect(listed.items[0]).not.toHaveProperty('result');
    });

    it('retry ID, retry --all-dead, requeue, kill --reason, cancel; illegal transitions exit 1 with the reason', async () => {
      const one = await makeDead(store, 'cli.retry');
      const r = await run('retry', one);
      expect(r).toMatchObject({ code: 0, out: `command ${one}: retry done, now PENDING\n` });
      const again = await run('retry', one);
      expect(again.code).toBe(1);
      expect(again.err).toContain('it is PENDING');

      const d1 = await makeDead(store, 'cli.bulk');
      const d2 = await makeDead(store, 'cli.bulk');
      const other = await makeDead(store, 'cli.other');
      const bulk = await run('retry', '--all-dead', '--type', 'cli.bulk', '--json');
      expect(bulk.code).toBe(0);
      expect(JSON.parse(bulk.out).retried.sort()).toEqual([d1, d2].sort());
      expect((await store.get(other))?.status).toBe('DEAD');
      expect((await run('retry', '--all-dead')).out).toMatch(/^retried [1-9]\d* dead command\(s\)$/m);
      expect((await store.get(other))?.status).toBe('PENDING');

      expect((await run('retry')).code).toBe(2);
      expect((await run('retry', one, '--all-dead')).code).toBe(2);
      expect((await run('retry', one, '--type', 'x')).code).toBe(2);

      const running = await submit(store, 'cli.admin');
      await claim(store, running);
      const cancel = await run('cancel', running);
      expect(cancel.code).toBe(1);
      expect(cancel.err).toContain('it is RUNNING');
      expect((await run('requeue', running)).out).toBe(`command ${running}: requeue done, now PENDING\n`);
      expect((await run('requeue', running)).code).toBe(1);
      const killed = await run('kill', running, '--reason', 'duplicate order', '--json');
      expect(killed.code).toBe(0);
      expect(JSON.parse(killed.out)).toMatchObject({ status: 'CANCELLED', lastError: 'duplicate order' });
      const pending = await submit(store, 'cli.admin');
      expect((await run('cancel', pending, '--reason', 'customer asked')).code).toBe(0);
      expect((await store.get(pending))?.lastError).toBe('customer asked');
      expect((await run('kill', '12x')).code).toBe(2);
      expect((await run('kill', '987654321')).code).toBe(1);
    });

    it('retry --all-dead reports the dead letters it could not retry and exits 1', async () => {
      const blocked = await makeDead(store, 'cli.idem', 'no', 'order-5');
      const holder = await submitIdempotent(store, 'cli.idem', 'order-5');
      const retryable = await makeDead(store, 'cli.idem');
      const r = await run('retry', '--all-dead', '--type', 'cli.idem');
      expect(r.code).toBe(1);
      expect(r.out).toBe('retried 1 dead command(s)\n');
      expect(r.err).toContain(`command ${blocked}: command ${blocked} cannot become active again`);
      expect((await store.get(retryable))?.status).toBe('PENDING');
      const json = await run('retry', '--all-dead', '--type', 'cli.idem', '--json');
      expect(json.code).toBe(1);
      expect(JSON.parse(json.out)).toEqual({
        retried: [],
        failed: [
          { id: blocked, error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringContaining(holder) } },
        ],
      });
      await run('kill', blocked);
    });

    it('purge deletes finished commands in batches and keeps DEAD unless --include-dead', async () => {
      const ok = await Promise.all(
        [1, 2, 3].map(async () => (await succeed(store, await submit(store, 'cli.purge'))).id),
      );
      const cancelled = await submit(store, 'cli.purge');
      await store.cancel(cancelled);
      const dead = await makeDead(store, 'cli.purge');
      const pending = await submit(store, 'cli.purge');
      const latest = await store.get(dead);
      await untilDatabaseClockPasses(store, latest?.finishedAt ?? new Date());

      const none = await run('purge', '--older-than', '7d', '--json');
      expect(none.code).toBe(0);
      expect(JSON.parse(none.out).deleted).toBe(0);

      const purge = await run('purge', '--older-than', '1ms', '--batch-size', '2', '--json');
      expect(purge.code).toBe(0);
      const result = JSON.parse(purge.out);
      expect(result.deleted).toBeGreaterThanOrEqual(4);
      expect(result.batches).toBeGreaterThanOrEqual(3);
      for (const id of [...ok, cancelled]) expect(await store.get(id)).toBeNull();
      expect((await store.get(dead))?.status).toBe('DEAD');
      expect((await store.get(pending))?.status).toBe('PENDING');

      const withDead = await run('purge', '--older-than', '1ms', '--include-dead');
      expect(withDead.code).toBe(0);
      expect(withDead.out).toMatch(/^purged [1-9]\d* finished command\(s\) that finished before /);
      expect(await store.get(dead)).toBeNull();
      expect((await store.get(pending))?.status).toBe('PENDING');

      expect((await run('purge', '--older-than', '7')).code).toBe(2);
      expect((await run('purge')).code).toBe(2);
    });

    it("schedules list|pause|resume: the state is the database's; an unknown name exits 1, a bad one 2", async () => {
      const schedules = store.schedules;
      if (schedules === undefined) throw new Error('the store keeps no schedules');
      await schedules.declare(
        [{ name: 'cli-nightly', type: 'cli.report', cron: '0 0 3 * * *', timezone: 'Europe/Paris' }],
        new Date(),
      );
      const human = await run('schedules', 'list');
      expect(human.code).toBe(0);
      expect(human.out).toMatch(/^NAME\s+TYPE\s+CRON\s+TIMEZONE\s+STATE\s+LAST TICK\s+NEXT TICK\s+ORIGIN$/m);
      expect(human.out).toMatch(
        /^cli-nightly\s+cli\.report\s+0 0 3 \* \* \*\s+Europe\/Paris\s+running\s+-\s+\S+Z\s+code$/m,
      );
      const paused = await run('schedules', 'pause', 'cli-nightly', '--json');
      expect(paused.code).toBe(0);
      expect(JSON.parse(paused.out)).toMatchObject({ name: 'cli-nightly', paused: true, nextTick: null });
      expect((await schedules.get('cli-nightly'))?.paused).toBe(true);
      const listed = JSON.parse((await run('schedules', 'list', '--json')).out) as {
        items: { name: string; paused: boolean }[];
      };
      expect(listed.items.find((i) => i.name === 'cli-nightly')?.paused).toBe(true);
      const resumed = await run('schedules', 'resume', 'cli-nightly');
      expect(resumed.out).toMatch(/^schedule cli-nightly: running, next tick \S+Z$/m);
      expect((await schedules.get('cli-nightly'))?.paused).toBe(false);
      const missing = await run('schedules', 'pause', 'no-such-schedule');
      expect(missing.code).toBe(1);
      expect(missing.err).toContain('schedule "no-such-schedule" does not exist');
      expect((await run('schedules', 'pause', 'bad name!')).code).toBe(2);
    });

    it('pause|resume|paused: a type held for every instance; stats shows it; bad input exits 2, writes nothing', async (ctx) => {
      const pauses = store.typePauses;
      if (pauses === undefined) return ctx.skip();
      // Quotes, a slash and unicode: one type, printed quoted.
      const type = `cli."erp"/sync é`;
      await submit(store, type);
      const paused = await run('pause', type, '--reason', 'ERP maintenance until 14:00');
      expect(paused).toEqual({ code: 0, out: `type ${JSON.stringify(type)}: paused\n`, err: '' });
      expect((await run('pause', type)).out).toBe(`type ${JSON.stringify(type)}: was paused already\n`);
      expect(await pauses.list()).toEqual([
        { type, pausedAt: expect.any(Date), reason: 'ERP maintenance until 14:00' },
      ]);

      const listed = await run('paused');
      expect(listed.code).toBe(0);
      expect(listed.out).toMatch(/^PAUSED TYPE\s+PAUSED AT\s+PENDING\s+REASON$/m);
      expect(listed.out).toContain(`${type}  `);
      expect(listed.out).toMatch(/\S+Z\s+1\s+ERP maintenance until 14:00$/m);
      const json = JSON.parse((await run('paused', '--json')).out) as { items: unknown[] };
      expect(json.items).toEqual([
        { type, pausedAt: expect.any(String), reason: 'ERP maintenance until 14:00' },
      ]);
      const stats = await run('stats');
      expect(stats.out).toMatch(/^PAUSED TYPE\s+PAUSED AT\s+PENDING\s+REASON$/m);
      expect(JSON.parse((await run('stats', '--json')).out).pausedTypes).toEqual(json.items);

      for (const bad of [
        ['pause', ''],
        ['pause', 'x'.repeat(129)],
        ['pause', 'a\u0000b'],
        ['pause', 'cli.other', '--reason', ''],
        ['pause', 'cli.other', '--reason', 'r'.repeat(1_001)],
        ['resume', ''],
        ['pause'],
        ['resume', 'cli.other', '--reason', 'why'],
      ]) {
        const r = await run(...bad);
        expect(r.code, bad.join(' ').slice(0, 60)).toBe(2);
        expect(r.err).toMatch(/^(asynccmd: |error: )/);
      }
      expect((await run('pause', '')).err).toBe(
        'asynccmd: a type pause needs a command type of 1 to 128 characters, got 0 characters\n',
      );
      expect((await pauses.list()).map((p) => p.type)).toEqual([type]);

      const resumed = await run('resume', type, '--json');
      expect(JSON.parse(resumed.out)).toEqual({ type, paused: false, changed: true });
      expect((await run('resume', type)).out).toBe(`type ${JSON.stringify(type)}: was not paused\n`);
      expect((await run('paused')).out).toBe('no paused types\n');
      expect(JSON.parse((await run('paused', '--json')).out)).toEqual({ items: [] });
    });

    it('a missing table says to run asynccmd migrate, exits 1, and never prints the driver', async () => {
      const table = `no_table_${process.pid}`;
      // Named as the operator gave it: schema-qualified where --schema was passed.
      const schemaAt = db.cliArgs.indexOf('--schema');
      const shown = schemaAt === -1 ? table : `${db.cliArgs[schemaAt + 1]}.${table}`;
      for (const args of [
        ['stats'],
        ['list'],
        ['show', '1'],
        ['retry', '--all-dead'],
        ['purge', '--older-than', '1d'],
      ]) {
        const r = await run('--table', table, ...args);
        expect(r, args.join(' ')).toEqual({
          code: 1,
          out: '',
          err:
            `asynccmd: the command table ${shown} does not exist in this database: ` +
            'run "asynccmd migrate" (with the same --db, --table and --schema) to create it\n',
        });
      }
    });

    it('names the option a bad number or duration belongs to, and the bounds', async () => {
      const batch = await run('purge', '--older-than', '7d', '--batch-size', '0');
      expect(batch).toMatchObject({
        code: 2,
        err: 'asynccmd: --batch-size must be a whole number from 1 to 100000, not "0"\n',
      });
      const limit = await run('list', '--limit', '5000');
      expect(limit).toMatchObject({
        code: 2,
        err: 'asynccmd: --limit must be a whole number from 1 to 1000, not "5000"\n',
      });
      const long = await run('purge', '--older-than', '99999999999d');
      expect(long).toMatchObject({
        code: 2,
        err: 'asynccmd: "99999999999d" is too long: the longest duration is 36500d (100 years)\n',
      });
      expect((await run('purge', '--older-than', '0d')).err).toContain('"0d" must be a positive duration');
    });

    it('--pooler and --listen-db: PostgreSQL only, and only the modes there are', async () => {
      const r = await run('--pooler', 'session', 'stats');
      expect(r.code).toBe(2);
      expect(r.err).toMatch(
        store.dialect === 'postgres'
          ? /--pooler takes none or transaction, not "session"/
          : /PostgreSQL only/,
      );
      const listen = await run('--listen-db', 'mysql://x', 'stats');
      expect(listen.code).toBe(2);
      expect(listen.err).toMatch(store.dialect === 'postgres' ? /postgres:\/\/ URL/ : /PostgreSQL only/);
      // Spelled out, the default changes nothing on a direct connection.
      if (store.dialect === 'postgres') expect((await run('--pooler', 'none', 'stats')).code).toBe(0);
      // The variables are PostgreSQL's: set for it, they leave other databases' commands alone.
      const env = { ASYNCCMD_PG_POOLER: store.dialect === 'postgres' ? 'none' : 'transaction' };
      expect((await cli(['--db', db.url, ...db.cliArgs, 'stats'], env)).code).toBe(0);
    });

    it('refuses a hostile table name before touching the database', async () => {
      const r = await run('--table', 'x; DROP TABLE y', 'stats');
      expect(r.code).toBe(2);
      expect(r.err).toContain('not a valid SQL identifier');
    });
  });
}
