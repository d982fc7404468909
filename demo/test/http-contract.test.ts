import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationView } from '../src/domain/operation-view.js';
import { QUIET_PROFILES } from '../src/experiment/checks.js';
import { allCommandRows, countOf, pollHealth, pollOperation } from '../src/experiment/observe.js';
import { httpJson } from '../src/load/http-client.js';
import { startDemoService, type DemoService } from '../src/service.js';

const ORDER = { customerId: 'c-1', email: 'c1@example.test', items: [{ sku: 'mug', quantity: 2 }] };
const MADE_TO_ORDER = { ...ORDER, items: [{ sku: 'custom-print', quantity: 1 }] };

let dir: string;
let service: DemoService;
let sync: DemoService;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'demo-http-contract-'));
  service = await startDemoService({ filename: join(dir, 'split.db'), profiles: QUIET_PROFILES });
  sync = await startDemoService({
    filename: join(dir, 'sync.db'),
    boundary: 'synchronous',
    profiles: QUIET_PROFILES,
  });
});

afterAll(async () => {
  await service?.close();
  await sync?.close();
  rmSync(dir, { recursive: true, force: true });
});

const post = (s: DemoService, body: unknown, headers: Record<string, string> = {}) =>
  httpJson(`${s.url}/orders`, 'POST', body, headers);

interface Accepted {
  operationId: string;
  orderId: number;
  state: string;
  orderCreated: boolean;
  inventoryStatus: string;
  completedFacts: string[];
  pendingFacts: string[];
  statusUri: string;
}

describe('POST /orders on the split boundary', () => {
  it('answers 201 Created when the core facts hold: order location, completed and pending facts, status URI', async () => {
    const answer = await post(service, ORDER, { 'idempotency-key': 'contract-201' });
    expect(answer.status).toBe(201);
    const body = answer.body as Accepted;
    expect(answer.headers.location).toBe(`/orders/${body.orderId}`);
    expect(body.orderCreated).toBe(true);
    expect(body.inventoryStatus).toBe('RESERVED');
    expect(body.completedFacts).toEqual(
      expect.arrayContaining(['order.recorded', 'price.fixed', 'inventory.reserved']),
    );
    expect(body.completedFacts).not.toContain('inventory.confirmed');
    for (const fact of body.pendingFacts)
      expect(['user.notified', 'external.synced', 'projection.updated']).toContain(fact);
    expect(body.statusUri).toBe(`/operations/${body.operationId}`);

    const done = await pollOperation(service.url, body.operationId, (v) => v.terminal);
    expect(done.state).toBe('completed');
    expect(done.pendingFacts).toEqual([]);
    expect(done.commands.map((c) => [c.fact, c.status]).sort()).toEqual([
      ['external.synced', 'SUCCESS'],
      ['projection.updated', 'SUCCESS'],
      ['user.notified', 'SUCCESS'],
    ]);
    // The follow-ups are one workflow, submitted with the order: its admin status resource.
    expect(done.links.followUps).toBe(`/admin/workflows/order-${body.orderId}-v1`);
    await expectFollowUpsWorkflow(done);
    const order = await httpJson(`${service.url}/orders/${body.orderId}`, 'GET');
    expect(order.status).toBe(200);
    expect((order.body as { status: string; totalCents: number }).totalCents).toBe(2_400);
  });

  it('answers 202 Accepted with Location = status URI when a made-to-order product needs the supplier', async () => {
    const answer = await post(service, MADE_TO_ORDER, { 'idempotency-key': 'contract-202-product' });
    expect(answer.status).toBe(202);
    const body = answer.body as Accepted & { terminalStates: string[] };
    expect(answer.headers.location).toBe(body.statusUri);
    expect(answer.headers['retry-after']).toBe('1');
    expect(body.orderCreated).toBe(false);
    expect(body.inventoryStatus).toBe('PENDING_CONFIRMATION');
    expect(body.completedFacts).toEqual(['order.recorded', 'price.fixed']);
    expect(body.pendingFacts).toContain('inventory.confirmed');
    expect(body.terminalStates).toContain('completed');

    const done = await pollOperation(service.url, body.operationId, (v) => v.terminal);
    expect(done.state).toBe('completed');
    expect(done.order.status).toBe('CONFIRMED');
    // The follow-ups are snapshots of the confirmed version (2), submitted when the supplier said yes.
    expect(done.order.version).toBe(2);
    expect(done.commands.map((c) => c.fact).sort()).toEqual([
      'external.synced',
      'inventory.confirmed',
      'projection.updated',
      'user.notified',
    ]);
    // The supplier's answer, as the confirming executor left it (ctx.setResult).
    expect(done.commands.find((c) => c.fact === 'inventory.confirmed')?.result).toEqual({
      decision: 'CONFIRMED',
    });
    expect(done.commands.find((c) => c.fact === 'user.notified')?.result).toBeNull();
    // Submitted by the transactional confirmation in its own transaction (ctx.workflow).
    expect(done.links.followUps).toBe(`/admin/workflows/order-${body.orderId}-v2`);
    await expectFollowUpsWorkflow(done);
  });

  it('answers 202 for local products too when the request asks for supplier confirmation', async () => {
    const answer = await post(
      service,
      { ...ORDER, inventoryConfirmation: 'downstream' },
      { 'idempotency-key': 'flag' },
    );
    expect(answer.status).toBe(202);
    expect((answer.body as Accepted).pendingFacts).toContain('inventory.confirmed');
  });

  it('ends a 202 operation as rejected when the supplier refuses, without any follow-up', async () => {
    const answer = await post(service, { ...MADE_TO_ORDER, items: [{ sku: 'custom-print', quantity: 45 }] });
    expect(answer.status).toBe(202);
    const done = await pollOperation(service.url, (answer.body as Accepted).operationId, (v) => v.terminal);
    expect(done.state).toBe('rejected');
    expect(done.failedFacts).toEqual(['inventory.confirmed']);
    expect(done.order.rejectReason).toMatch(/supplier cannot make 45/);
    expect(done.commands.map((c) => c.fact)).toEqual(['inventory.confirmed']);
    expect(done.commands[0]?.result).toEqual({ decision: 'REJECTED' });
    expect(done.links.followUps).toBeNull();
  });

  it('refuses bad input with 400 and every problem named, and creates nothing', async () => {
    const before = await countOrders(service);
    const answer = await post(service, { customerId: '', items: [{ sku: 'nope', quantity: 0 }], extra: 1 });
    expect(answer.status).toBe(400);
    const body = answer.body as { error: string; message: string; problems: { field: string }[] };
    expect(body.error).toBe('invalid_request');
    expect(body.problems.map((p) => p.field).sort()).toEqual(
      ['customerId', 'email', 'extra', 'items[0].quantity', 'items[0].sku'].sort(),
    );
    expect(body.message).toMatch(/email is required/);
    expect((await post(service, { ...MADE_TO_ORDER, inventoryConfirmation: 'local' })).status).toBe(400);
    expect((await post(service, ORDER, { 'idempotency-key': 'has spaces' })).status).toBe(400);
    expect(
      (await post(service, { ...ORDER, requestId: 'a' }, { 'idempotency-key': 'b' })).status,
      'requestId and Idempotency-Key disagree',
    ).toBe(400);
    const notJson = await httpJson(`${service.url}/orders`, 'POST', undefined, {
      'content-type': 'application/json',
    });
    expect(notJson.status).toBe(400);
    expect((notJson.body as { error: string }).error).toBe('invalid_json');
    expect(await countOrders(service)).toBe(before);
  });

  it('turns a retried request id into one order and one set of commands (header or body field)', async () => {
    const first = await post(service, ORDER, { 'idempotency-key': 'retry-me' });
    const again = await Promise.all([
      post(service, ORDER, { 'idempotency-key': 'retry-me' }),
      post(service, { ...ORDER, requestId: 'retry-me' }),
    ]);
    expect(first.status).toBe(201);
    for (const a of again) {
      expect(a.status).toBe(201);
      expect(a.headers['idempotent-replayed']).toBe('true');
      expect((a.body as Accepted).orderId).toBe((first.body as Accepted).orderId);
    }
    const orderId = (first.body as Accepted).orderId;
    expect(
      await service.db.session.all("SELECT COUNT(*) AS n FROM orders WHERE request_id = 'retry-me'"),
    ).toEqual([{ n: 1 }]);
    expect(
      await countOf(
        service.db.session,
        `SELECT COUNT(*) AS n FROM ${await allCommandRows(service.db.session)} WHERE biz_key = ?`,
        [`order-${orderId}-v1`],
      ),
    ).toBe(3);
    const misuse = await post(
      service,
      { ...ORDER, items: [{ sku: 'mug', quantity: 3 }] },
      { 'idempotency-key': 'retry-me' },
    );
    expect(misuse.status).toBe(422);
    expect((misuse.body as { error: string }).error).toBe('request_id_reused');
  });

  it('answers 409 when local stock runs out, and records nothing', async () => {
    const answer = await post(service, { ...ORDER, items: [{ sku: 'kettle', quantity: 26 }] });
    expect(answer.status).toBe(409);
    expect((answer.body as { error: string }).error).toBe('out_of_stock');
  });

  it('GET /operations/:id: 404 for an unknown id, 400 for a malformed one', async () => {
    expect(
      (await httpJson(`${service.url}/operations/00000000-0000-4000-8000-000000000000`, 'GET')).status,
    ).toBe(404);
    expect((await httpJson(`${service.url}/operations/not-an-id`, 'GET')).status).toBe(400);
    expect((await httpJson(`${service.url}/orders/abc`, 'GET')).status).toBe(400);
  });

  it('mounts the admin API under /admin, and /health and /metrics', async () => {
    const answer = await post(service, ORDER);
    const view = (await httpJson(`${service.url}${(answer.body as Accepted).statusUri}`, 'GET'))
      .body as OperationView;
    const command = view.commands[0];
    expect(command).toBeDefined();
    const status = await httpJson(`${service.url}${command?.links.status ?? ''}`, 'GET');
    expect(status.status).toBe(200);
    expect((status.body as { id: string }).id).toBe(command?.id);
    const health = await httpJson(`${service.url}/health`, 'GET');
    expect(health.status).toBe(200);
    expect((health.body as { status: string }).status).toBe('UP');
    const metrics = await httpJson(`${service.url}/metrics`, 'GET');
    expect(metrics.status).toBe(200);
    expect(String(metrics.body)).toContain('asynccmd_commands_submitted_total');
    expect((await httpJson(`${service.url}/admin/stats`, 'GET')).status).toBe(200);
  });

  it('serves the dashboard under /admin/dashboard, its data without a login (auth: none, loopback)', async () => {
    const page = await fetch(`${service.url}/admin/dashboard`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await page.text()).toContain('<script type="module" src="/admin/dashboard/app.js"></script>');
    const summary = await httpJson(`${service.url}/admin/dashboard/api/summary`, 'GET');
    expect(summary.status).toBe(200);
    expect((summary.body as { health: { status: string } }).health.status).toMatch(/^(UP|DOWN)$/);
  });
});

describe('a 202 whose confirmation dead-letters', () => {
  it('is terminal as follow_up_failed with nothing pending, and an admin retry completes the order', async () => {
    service.downstreams.inventory.goDown('supplier API unreachable');
    let operationId: string;
    try {
      const answer = await post(service, MADE_TO_ORDER, { 'idempotency-key': 'confirm-dies' });
      expect(answer.status).toBe(202);
      operationId = (answer.body as Accepted).operationId;
      const failed = await pollOperation(service.url, operationId, (v) => v.terminal);
      expect(failed.state).toBe('follow_up_failed');
      expect(failed.failedFacts).toEqual(['inventory.confirmed']);
      expect(failed.pendingFacts).toEqual([]);
      expect(failed.order.status).toBe('AWAITING_INVENTORY');
      // /health serves one answer per second to every caller: the dead letter shows within that.
      expect((await pollHealth(service.url, 503)).status).toBe(503);
    } finally {
      service.downstreams.inventory.recover();
    }
    const dead = (await httpJson(`${service.url}/operations/${operationId}`, 'GET')).body as OperationView;
    const retry = await httpJson(`${service.url}${dead.commands[0]?.links.status ?? ''}/retry`, 'POST');
    expect(retry.status).toBe(200);
    const done = await pollOperation(service.url, operationId, (v) => v.state === 'completed');
    expect(done.state).toBe('completed');
    expect(done.completedFacts).toHaveLength(6);
    expect((await pollHealth(service.url, 200)).status).toBe(200);
  });
});

describe('POST /orders on the all-synchronous boundary', () => {
  it('answers 201 with every fact completed when all downstreams answer', async () => {
    const answer = await post(sync, ORDER);
    expect(answer.status).toBe(201);
    const body = answer.body as Accepted;
    expect(body.pendingFacts).toEqual([]);
    expect(body.state).toBe('completed');
  });

  it('answers 502 when a downstream fails mid-request — although the order was recorded', async () => {
    sync.downstreams.external.goDown();
    try {
      const before = await countOrders(sync);
      const answer = await post(sync, ORDER);
      expect(answer.status).toBe(502);
      expect((answer.body as { error: string }).error).toBe('downstream_failed');
      expect(await countOrders(sync)).toBe(before + 1);
    } finally {
      sync.downstreams.external.recover();
    }
  });
});

/** The follow-ups' workflow says what the view does: its three steps, each the command the view lists. */
async function expectFollowUpsWorkflow(view: OperationView): Promise<void> {
  const workflow = await httpJson(`${service.url}${view.links.followUps ?? ''}`, 'GET');
  expect(workflow.status).toBe(200);
  const body = workflow.body as { state: string; steps: { name: string; id: string; status: string }[] };
  expect(body.state).toBe('completed');
  const idOf = (fact: string) => view.commands.find((c) => c.fact === fact)?.id;
  expect(body.steps.map((s) => [s.name, s.id, s.status])).toEqual([
    ['notify-user', idOf('user.notified'), 'SUCCESS'],
    ['sync-external', idOf('external.synced'), 'SUCCESS'],
    ['update-projection', idOf('projection.updated'), 'SUCCESS'],
  ]);
}

async function countOrders(s: DemoService): Promise<number> {
  const [row] = await s.db.session.all<{ n: number }>('SELECT COUNT(*) AS n FROM orders');
  return row?.n ?? 0;
}
