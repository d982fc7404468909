import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import type { DownstreamProfiles } from '../downstream.js';
import type { OperationView } from '../domain/operation-view.js';
import { httpJson } from '../load/http-client.js';
import { startDemoService, type DemoService } from '../service.js';
import { startChildDemo, type ChildDemo } from './child-demo.js';
import {
  commandCountsByStatus,
  errorMessage,
  formatCounts,
  healthReasons,
  pollCommand,
  pollHealth,
  pollOperation,
  readDatabase,
} from './observe.js';

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
 * downstreams, so work is in flight at the kill; the restarted server on the same SQLite file
 * takes back the RUNNING commands once their leases lapse and runs the PENDING ones.
 */
export async function checkKillAfterAcceptance(dir: string, orders = 12): Promise<CheckResult> {
  const file = join(dir, 'kill.db');
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
    const atKill = readDatabase(file, commandCountsByStatus);

    const second = await startChildDemo(file);
    children.push(second);
    const views = await Promise.all(
      operationIds.map((id) => pollOperation(second.url, id, isTerminal, 30_000)),
    );
    await second.stop();
    const after = readDatabase(file, (db) => ({
      counts: commandCountsByStatus(db),
      rescued: (
        db.prepare('SELECT COUNT(*) AS n FROM async_command WHERE rescue_count > 0').get() as { n: number }
      ).n,
      orders: (db.prepare('SELECT COUNT(*) AS n FROM orders').get() as { n: number }).n,
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

/**
 * (2) A downstream fails after acceptance: the command retries, then becomes a visible dead letter
 * (the operation says follow_up_failed, /health is DOWN); once the downstream is back, a retry
 * from the admin API completes it.
 */
export async function checkDownstreamFailure(dir: string): Promise<CheckResult> {
  const service = await startDemoService({
    filename: join(dir, 'downstream-failure.db'),
    profiles: QUIET_PROFILES,
    retry: { maxRetry: 2, backoffBaseMs: 50, backoffCapMs: 200 },
  });
  try {
    service.downstreams.external.goDown('ERP answered 503 (simulated outage)');
    const answer = await postOrder(service.url, ORDER, 'downstream-failure-1');
    const operationId = (answer.body as { operationId: string }).operationId;
    const failed = await pollOperation(service.url, operationId, (v) => v.state === 'follow_up_failed');
    const sync = failed.commands.find((c) => c.fact === 'external.synced');
    const healthDown = await pollHealth(service.url, 503);
    const downReasons = healthReasons(healthDown);
    // The error text is the admin API's to show (the public operation view carries none).
    const dead = sync ? await httpJson(`${service.url}/admin/commands/${sync.id}`, 'GET') : null;
    const lastError = (dead?.body as { lastError?: string | null } | undefined)?.lastError ?? '';

    service.downstreams.external.recover();
    const retry = sync ? await httpJson(`${service.url}/admin/commands/${sync.id}/retry`, 'POST') : null;
    const done = await pollOperation(service.url, operationId, (v) => v.state === 'completed');
    const healthUp = await pollHealth(service.url, 200);
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
      },
    };
  } finally {
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
export async function checkUnknownResponseRetry(dir: string, retries = 4): Promise<CheckResult> {
  const service = await startDemoService({
    filename: join(dir, 'unknown-response.db'),
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
    const counts = countOrderAndCommands(service, key);
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

function countOrderAndCommands(
  service: DemoService,
  requestId: string,
): { orders: number; commands: number } {
  const db = service.db;
  const orders = db.prepare('SELECT id FROM orders WHERE request_id = ?').all(requestId) as { id: number }[];
  const ids = orders.map((o) => o.id);
  const commands = ids.length
    ? (
        db
          .prepare(
            `SELECT COUNT(*) AS n FROM async_command WHERE biz_key IN (SELECT 'order-' || value || '-v1' FROM json_each(?))`,
          )
          .get(JSON.stringify(ids)) as { n: number }
      ).n
    : 0;
  return { orders: orders.length, commands };
}

/**
 * (4) Cancel before start → CANCELLED; cancel after the irreversible point (the external call is
 * RUNNING, the notification already sent) → refused with the reason. The projection is delayed
 * a minute here so it is reliably not started; the ERP call is slow so it is reliably running.
 */
export async function checkCancel(dir: string): Promise<CheckResult> {
  const service = await startDemoService({
    filename: join(dir, 'cancel.db'),
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
