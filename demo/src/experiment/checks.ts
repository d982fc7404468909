import { request as httpRequest } from 'node:http';
import { withTargetSession, type DatabaseTarget } from '../db/database.js';
import { placeholders, type SqlSession } from '../db/sql.js';
import type { DownstreamProfiles } from '../downstream.js';
import type { OperationView } from '../domain/operation-view.js';
import { httpJson } from '../load/http-client.js';
import { startDemoService, type DemoService } from '../service.js';
import { sleep } from '../stats.js';
import { startChildDemo, type ChildDemo } from './child-demo.js';
import {
  allCommandRows,
  commandCountsByStatus,
  countOf,
  errorMessage,
  formatCounts,
  healthReasons,
  pollCommand,
  pollHealth,
  pollOperation,
} from './observe.js';

/** A database of its own for each part of the experiment (see places.ts). */
export type PlaceOf = (part: string) => DatabaseTarget;

/** One moment of a failure check, for its timeline picture: ms since the check began. */
export interface TimelineEvent {
  readonly atMs: number;
  /** Who it happened to: the client, a command, the downstream, /health, the operator. */
  readonly lane: string;
  readonly event: string;
}

const LANE_OF_TYPE: Readonly<Record<string, string>> = {
  'order.confirm-inventory': 'supplier confirmation',
  'order.notify-user': 'notification command',
  'order.sync-external': 'ERP sync command',
  'order.update-projection': 'projection command',
};

export interface CheckResult {
  readonly id: string;
  readonly title: string;
  readonly expected: string;
  readonly observed: string;
  readonly passed: boolean;
  readonly details: Record<string, unknown>;
}

/** Fast, failure-free downstreams: the checks inject exactly the failure they are about. */
export const QUIET_PROFILES: DownstreamProfiles = {
  inventory: { latencyMs: 5, failureRate: 0 },
  notification: { latencyMs: 5, failureRate: 0 },
  external: { latencyMs: 10, failureRate: 0 },
  projection: { latencyMs: 1, failureRate: 0 },
};

const ORDER = {
  customerId: 'check',
  email: 'check@example.test',
  items: [{ sku: 'tea-green', quantity: 1 }],
};

function postOrder(baseUrl: string, body: unknown, key: string) {
  return httpJson(`${baseUrl}/orders`, 'POST', body, { 'idempotency-key': key });
}

const isTerminal = (v: OperationView) => v.terminal;

/**
 * (1) The process is killed (SIGKILL) right after acceptance and restarted: the accepted orders
 * still reach their terminal states. A real child process runs the built demo server with slow
 * downstreams, so work is in flight at the kill; the restarted server on the same database
 * takes back the RUNNING commands once their leases lapse and runs the PENDING ones.
 */
export async function checkKillAfterAcceptance(place: PlaceOf, orders = 12): Promise<CheckResult> {
  const file = place('kill');
  const children: ChildDemo[] = [];
  try {
    const first = await startChildDemo(file, ['--latency-scale', '15']);
    children.push(first);
    const answers = await Promise.all(
      Array.from({ length: orders }, (_, i) =>
        postOrder(
          first.url,
          i % 4 === 3 ? { ...ORDER, items: [{ sku: 'custom-print', quantity: 1 }] } : ORDER,
          `kill-check-${i}`,
        ),
      ),
    );
    await first.kill();
    const accepted = answers.filter((a) => a.status === 201 || a.status === 202);
    const operationIds = accepted.map((a) => (a.body as { operationId: string }).operationId);
    const atKill = await withTargetSession(file, commandCountsByStatus);

    const second = await startChildDemo(file);
    children.push(second);
    const views = await Promise.all(
      operationIds.map((id) => pollOperation(second.url, id, isTerminal, 30_000)),
    );
    await second.stop();
    const after = await withTargetSession(file, async (db) => ({
      counts: await commandCountsByStatus(db),
      rescued: await countOf(
        db,
        `SELECT COUNT(*) AS n FROM ${await allCommandRows(db)} WHERE rescue_count > 0`,
      ),
      orders: await countOf(db, 'SELECT COUNT(*) AS n FROM orders'),
    }));
    const states: Record<string, number> = {};
    for (const v of views) states[v.state] = (states[v.state] ?? 0) + 1;
    const terminal = views.filter((v) => v.terminal).length;
    const passed =
      accepted.length === orders && terminal === accepted.length && after.orders === accepted.length;
    return {
      id: 'process-killed-after-acceptance',
      title: '1. process killed (SIGKILL) right after acceptance, then restarted',
      expected: 'every accepted order reaches a terminal state after the restart; none is lost',
      observed:
        `${accepted.length}/${orders} accepted (pid ${first.child.pid} SIGKILLed right after the last answer); ` +
        `commands at the kill: ${formatCounts(atKill)}; after the restart: ${terminal}/${accepted.length} operations terminal ` +
        `(${formatCounts(states)}), ${after.rescued} command(s) taken back from the dead process after their lease lapsed; ` +
        `commands now: ${formatCounts(after.counts)}`,
      passed,
      details: { accepted: accepted.length, atKill, afterRestart: after, operationStates: states },
    };
  } finally {
    for (const c of children) await c.kill();
  }
}

/** What the projection committed, counted from the order tables, never from the command table. */
interface ProjectionLedger {
  /** Committed deliveries per order id, from the projection's ledger (one row per order version). */
  readonly deliveries: Map<number, number>;
  /** Orders the read model counts, and their total, against the orders table's. */
  readonly readModel: { readonly orders: number; readonly totalCents: number };
  readonly placed: { readonly orders: number; readonly totalCents: number };
}

async function projectionLedger(db: SqlSession): Promise<ProjectionLedger> {
  const rows = await db.all<{ effect_key: string; calls: number | string }>(
    "SELECT effect_key, calls FROM downstream_call WHERE downstream = 'projection'",
  );
  const deliveries = new Map<number, number>();
  for (const r of rows) {
    const orderId = Number(/^projection:(\d+):v\d+$/.exec(r.effect_key)?.[1] ?? Number.NaN);
    deliveries.set(orderId, (deliveries.get(orderId) ?? 0) + Number(r.calls));
  }
  const sums = async (sql: string) => {
    const [row] = await db.all<{ n: number | string | null; cents: number | string | null }>(sql);
    return { orders: Number(row?.n ?? 0), totalCents: Number(row?.cents ?? 0) };
  };
  return {
    deliveries,
    readModel: await sums('SELECT SUM(orders) AS n, SUM(total_cents) AS cents FROM customer_projection'),
    placed: await sums('SELECT COUNT(*) AS n, SUM(total_cents) AS cents FROM orders'),
  };
}

/**
 * (5) The projection is applied exactly once under SIGKILL. A child process drains a backlog of
 * projections — transactional, one at a time in its poll loop, each about 200 ms inside its
 * transaction here — and is SIGKILLed mid-drain, right after one of them committed, then restarted
 * on the same database; `kills` times. Counted from outside the command tables: every order's
 * projection delivered once in the projection's ledger (`downstream_call`, whose counter a second
 * committed delivery raises), and the read model holding each order once.
 */
export async function checkProjectionExactlyOnce(
  place: PlaceOf,
  orders = 16,
  kills = 3,
): Promise<CheckResult> {
  const target = place('projection');
  const children: ChildDemo[] = [];
  // Slowed 40×, nothing failing: the projections queue up behind each other, and the kill falls
  // between the commit of one and the next, or inside its transaction.
  const slow = ['--latency-scale', '40', '--failure-scale', '0'];
  try {
    let child = await startChildDemo(target, slow);
    children.push(child);
    const answers = await Promise.all(
      Array.from({ length: orders }, (_, i) =>
        postOrder(child.url, { ...ORDER, customerId: `projection-${i % 4}` }, `projection-check-${i}`),
      ),
    );
    const accepted = answers.filter((a) => a.status === 201);
    const atKills: { pid: number | undefined; committed: number; running: number }[] = [];
    for (let k = 1; k <= kills; k++) {
      const victim = child;
      atKills.push(
        await withTargetSession(target, async (db) => {
          const committed = () =>
            countOf(db, "SELECT COUNT(*) AS n FROM downstream_call WHERE downstream = 'projection'");
          // Polled back to back, so the kill falls right after a projection's commit: where its effect
          // and its SUCCESS were written apart, before that SUCCESS, leaving a delivery to repeat.
          const threshold = Math.ceil((k * accepted.length) / (kills + 1));
          const until = Date.now() + 30_000;
          while ((await committed()) < threshold && Date.now() < until) await sleep(0);
          await victim.kill();
          return {
            pid: victim.child.pid,
            committed: await committed(),
            running: await countOf(
              db,
              "SELECT COUNT(*) AS n FROM async_command WHERE type = 'order.update-projection' AND status = 'RUNNING'",
            ),
          };
        }),
      );
      // The last restart runs at full speed, and drains what is left.
      child = await startChildDemo(target, k < kills ? slow : ['--failure-scale', '0']);
      children.push(child);
    }
    const last = child;
    const views = await Promise.all(
      accepted.map((a) =>
        pollOperation(last.url, (a.body as { operationId: string }).operationId, isTerminal, 30_000),
      ),
    );
    await last.stop();
    const ledger = await withTargetSession(target, projectionLedger);
    const orderIds = accepted.map((a) => (a.body as { orderId: number }).orderId);
    const notOnce = orderIds.filter((id) => ledger.deliveries.get(id) !== 1);
    const completed = views.filter((v) => v.state === 'completed').length;
    const readModelHoldsEach =
      ledger.readModel.orders === ledger.placed.orders &&
      ledger.readModel.totalCents === ledger.placed.totalCents;
    const passed =
      accepted.length === orders &&
      completed === accepted.length &&
      notOnce.length === 0 &&
      ledger.deliveries.size === accepted.length &&
      readModelHoldsEach;
    const killed = atKills
      .map((a) => `pid ${a.pid} at ${a.committed}/${accepted.length} committed, ${a.running} RUNNING`)
      .join('; ');
    return {
      id: 'projection-exactly-once-under-sigkill',
      title: `5. the projection under SIGKILL mid-drain (${kills} ×), each time restarted`,
      expected:
        "every order's projection applied exactly once, counted outside the command tables (its ledger, the read model)",
      observed:
        `${accepted.length}/${orders} accepted; SIGKILLed right after a projection committed: ${killed}; ` +
        `after the last restart ${completed}/${accepted.length} operations completed; projection deliveries per order: ` +
        `${formatCounts(countBy(orderIds.map((id) => `${ledger.deliveries.get(id) ?? 0}×`)))} (the ledger's count of committed deliveries); ` +
        `read model ${ledger.readModel.orders} orders, ${ledger.readModel.totalCents} cents for ${ledger.placed.orders} placed, ${ledger.placed.totalCents} cents`,
      passed,
      details: {
        accepted: accepted.length,
        atKills,
        deliveriesPerOrder: Object.fromEntries(orderIds.map((id) => [id, ledger.deliveries.get(id) ?? 0])),
        readModel: ledger.readModel,
        placed: ledger.placed,
        operationStates: countBy(views.map((v) => v.state)),
      },
    };
  } finally {
    for (const c of children) await c.kill();
  }
}

function countBy(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}

/**
 * (2) A downstream fails after acceptance: the command retries, then becomes a visible dead letter
 * (the operation says follow_up_failed, /health is DOWN); once the downstream is back, a retry
 * from the admin API completes it.
 */
export async function checkDownstreamFailure(place: PlaceOf): Promise<CheckResult> {
  const service = await startDemoService({
    database: place('outage'),
    profiles: QUIET_PROFILES,
    retry: { maxRetry: 2, backoffBaseMs: 50, backoffCapMs: 200 },
  });
  const started = performance.now();
  const timeline: TimelineEvent[] = [];
  const mark = (lane: string, event: string) =>
    timeline.push({ atMs: Math.round(performance.now() - started), lane, event });
  const unsubscribe = service.onCommandEvent((e) => {
    if (e.kind !== 'started' && e.kind !== 'retried' && e.kind !== 'dead' && e.kind !== 'succeeded') return;
    const lane = LANE_OF_TYPE[e.command.type] ?? e.command.type;
    const event = {
      started: 'attempt',
      retried: 'failed, retried',
      dead: 'dead letter',
      succeeded: 'succeeded',
    };
    mark(lane, event[e.kind]);
  });
  try {
    service.downstreams.external.goDown('ERP answered 503 (simulated outage)');
    mark('ERP (downstream)', 'down');
    const answer = await postOrder(service.url, ORDER, 'downstream-failure-1');
    mark('client', `accepted (${answer.status})`);
    const operationId = (answer.body as { operationId: string }).operationId;
    const failed = await pollOperation(service.url, operationId, (v) => v.state === 'follow_up_failed');
    mark('client', `sees ${failed.state}`);
    const sync = failed.commands.find((c) => c.fact === 'external.synced');
    const healthDown = await pollHealth(service.url, 503);
    mark('/health', `${healthDown.status}`);
    const downReasons = healthReasons(healthDown);
    // The error text is the admin API's to show (the public operation view carries none).
    const dead = sync ? await httpJson(`${service.url}/admin/commands/${sync.id}`, 'GET') : null;
    const lastError = (dead?.body as { lastError?: string | null } | undefined)?.lastError ?? '';

    service.downstreams.external.recover();
    mark('ERP (downstream)', 'recovered');
    const retry = sync ? await httpJson(`${service.url}/admin/commands/${sync.id}/retry`, 'POST') : null;
    mark('operator', `admin retry (${retry?.status ?? '—'})`);
    const done = await pollOperation(service.url, operationId, (v) => v.state === 'completed');
    mark('client', `sees ${done.state}`);
    const healthUp = await pollHealth(service.url, 200);
    mark('/health', `${healthUp.status}`);
    const passed =
      answer.status === 201 &&
      failed.state === 'follow_up_failed' &&
      sync?.status === 'DEAD' &&
      healthDown.status === 503 &&
      retry?.status === 200 &&
      done.state === 'completed' &&
      healthUp.status === 200;
    return {
      id: 'downstream-fails-after-acceptance',
      title: '2. a downstream fails after acceptance',
      expected:
        'retries, then a visible dead letter (health DOWN); an admin retry completes it once the downstream is back',
      observed:
        `order answered ${answer.status}; external.synced failed ${sync ? sync.failedAttempts : '?'} times → ${sync?.status ?? '?'} ` +
        `(lastError "${lastError}"), operation ${failed.state}; GET /health → ${healthDown.status} ` +
        `(${downReasons || 'no reason'}); downstream recovered, POST /admin/commands/${sync?.id ?? '?'}/retry → ` +
        `${retry?.status ?? '—'}; operation ${done.state}; GET /health → ${healthUp.status}`,
      passed,
      details: {
        operationId,
        deadCommand: sync,
        healthWhileDead: healthDown.body,
        retryStatus: retry?.status,
        finalState: done.state,
        timeline,
      },
    };
  } finally {
    unsubscribe();
    await service.close();
  }
}

/** Sends a POST and destroys the connection as soon as the answer starts: the client never learns the outcome. */
function postAndLoseTheAnswer(baseUrl: string, body: unknown, key: string): Promise<string> {
  return new Promise((resolve) => {
    const text = JSON.stringify(body);
    const req = httpRequest(`${baseUrl}/orders`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
        'idempotency-key': key,
      },
    });
    req.on('response', (res) => {
      res.destroy();
      req.destroy();
      resolve('the connection dropped before the answer could be read');
    });
    req.on('error', (e) => resolve(`request failed: ${e.message}`));
    req.end(text);
  });
}

/**
 * (3) The client retries after an unknown response with the same request id: one order, one set
 * of commands, however many retries (also concurrent ones).
 */
export async function checkUnknownResponseRetry(place: PlaceOf, retries = 4): Promise<CheckResult> {
  const service = await startDemoService({
    database: place('retry'),
    profiles: QUIET_PROFILES,
  });
  try {
    const key = 'unknown-response-1';
    const lost = await postAndLoseTheAnswer(service.url, ORDER, key);
    const answers = await Promise.all(
      Array.from({ length: retries }, () => postOrder(service.url, ORDER, key)),
    );
    const orderIds = new Set(answers.map((a) => (a.body as { orderId?: number }).orderId));
    const replayed = answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length;
    const counts = await countOrderAndCommands(service, key);
    const passed =
      answers.every((a) => a.status === 201) &&
      orderIds.size === 1 &&
      counts.orders === 1 &&
      counts.commands === 3;
    return {
      id: 'client-retries-after-unknown-response',
      title: '3. the client retries after an unknown response (same request id)',
      expected: 'one order and one set of commands',
      observed:
        `first attempt: ${lost}; ${retries} concurrent retries answered ${[...new Set(answers.map((a) => a.status))].join('/')} ` +
        `(${replayed} marked Idempotent-Replayed) with order id ${[...orderIds].join(', ')}; the database holds ` +
        `${counts.orders} order and ${counts.commands} commands for request id ${key}`,
      passed,
      details: { statuses: answers.map((a) => a.status), replayed, ...counts },
    };
  } finally {
    await service.close();
  }
}

async function countOrderAndCommands(
  service: DemoService,
  requestId: string,
): Promise<{ orders: number; commands: number }> {
  const db = service.db.session;
  const orders = await db.all<{ id: number | string }>('SELECT id FROM orders WHERE request_id = ?', [
    requestId,
  ]);
  const keys = orders.map((o) => `order-${Number(o.id)}-v1`);
  const commands = keys.length
    ? await countOf(
        db,
        `SELECT COUNT(*) AS n FROM ${await allCommandRows(db)} WHERE biz_key IN ${placeholders(keys.length)}`,
        keys,
      )
    : 0;
  return { orders: orders.length, commands };
}

/**
 * (4) Cancel before start → CANCELLED; cancel after the irreversible point (the external call is
 * RUNNING, the notification already sent) → refused with the reason. The projection is delayed
 * a minute here so it is reliably not started; the ERP call is slow so it is reliably running.
 */
export async function checkCancel(place: PlaceOf): Promise<CheckResult> {
  const service = await startDemoService({
    database: place('cancel'),
    profiles: { ...QUIET_PROFILES, external: { latencyMs: 3_000, failureRate: 0 } },
    projectionDelayMs: 60_000,
  });
  try {
    const answer = await postOrder(service.url, ORDER, 'cancel-1');
    const operationId = (answer.body as { operationId: string }).operationId;
    const view = await pollOperation(service.url, operationId, (v) => v.commands.length === 3);
    const idOf = (fact: string) => view.commands.find((c) => c.fact === fact)?.id ?? '0';
    const [projection, sync, notify] = [
      idOf('projection.updated'),
      idOf('external.synced'),
      idOf('user.notified'),
    ];
    const cancel = (id: string) =>
      httpJson(`${service.url}/admin/commands/${id}/cancel`, 'POST', {
        reason: 'customer withdrew the order',
      });

    const before = await cancel(projection);
    const beforeStatus = (before.body as { status?: string }).status;
    await pollCommand(service.url, sync, ['RUNNING', 'SUCCESS']);
    const running = await cancel(sync);
    await pollCommand(service.url, notify, ['SUCCESS']);
    const done = await cancel(notify);
    const final = await pollOperation(service.url, operationId, isTerminal);
    const passed =
      before.status === 200 &&
      beforeStatus === 'CANCELLED' &&
      running.status === 409 &&
      done.status === 409 &&
      final.state === 'cancelled';
    return {
      id: 'cancel-before-and-after-irreversible-point',
      title: '4. cancel before start, and after the irreversible point',
      expected: 'before start → CANCELLED; once running or done → refused with the reason',
      observed:
        `projection (not started) → ${before.status} ${beforeStatus ?? errorMessage(before)}; ` +
        `ERP sync (RUNNING) → ${running.status} "${errorMessage(running)}"; ` +
        `notification (SUCCESS) → ${done.status} "${errorMessage(done)}"; operation ended ${final.state} ` +
        `(completed: ${final.completedFacts.join(', ')}; cancelled: ${final.cancelledFacts.join(', ')})`,
      passed,
      details: {
        beforeStart: { status: before.status, body: before.body },
        whileRunning: { status: running.status, body: running.body },
        afterDone: { status: done.status, body: done.body },
        finalState: final.state,
      },
    };
  } finally {
    await service.close();
  }
}
