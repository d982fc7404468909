import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CommandEvent, CommandStore, Logger } from '@asynccmd/core';
import { createAdminHandler, createAsyncCommands } from '@asynccmd/runtime';
import { createMetrics } from '@asynccmd/runtime/metrics';
import { openDemoDatabase, type DatabaseTarget, type DemoDatabase, type DemoStore } from './db/database.js';
import {
  createDownstreams,
  DEFAULT_PROFILES,
  type Downstreams,
  type DownstreamProfiles,
} from './downstream.js';
import type { CommandGateway, OrderWorkflow } from './domain/gateway.js';
import { InlineOrderService } from './domain/inline-order-service.js';
import { buildOperationView } from './domain/operation-view.js';
import type { Order } from './domain/order.js';
import { OrderService } from './domain/order-service.js';
import { DEMO_RETRY, EXTERNAL_POOL, orderExecutors, type RetryProfile } from './executors.js';
import { HttpError, sendError, sendJson } from './http/json.js';
import { getOperation, getOrder, postOrder, type OrderBoundary } from './http/order-routes.js';

export const ADMIN_BASE = '/admin';

/** The port asked for is taken, and moving to another was not allowed. */
export class PortTakenError extends Error {
  constructor(readonly port: number) {
    super(`port ${port} on 127.0.0.1 is already in use`);
    this.name = 'PortTakenError';
  }
}

export interface DemoServiceOptions {
  /** Where the orders and the command table live, together (or `filename`: a SQLite file). */
  readonly database?: DatabaseTarget;
  /** The SQLite file holding the orders and the command table (when `database` is not given). */
  readonly filename?: string;
  /** 'split' (commands, the product) or 'synchronous' (the experiment's baseline). Default 'split'. */
  readonly boundary?: 'split' | 'synchronous';
  /** Default 0: any free port. */
  readonly port?: number;
  /** When `port` is taken, listen on a free one instead of failing (PortTakenError). Default false. */
  readonly movePortIfTaken?: boolean;
  readonly profiles?: DownstreamProfiles;
  readonly seed?: number;
  readonly retry?: RetryProfile;
  readonly projectionDelayMs?: number;
  /** Lease of a claim: a killed process's commands run again shortly after it passes. */
  readonly leaseMs?: number;
  readonly pollIntervalMs?: number;
  /** Isolated pool of the ERP sync (default 16). */
  readonly externalPoolSize?: number;
  /** Shared pool of the IMMEDIATE notification and supplier confirmation (default 32). */
  readonly sharedPoolSize?: number;
  readonly logger?: Logger;
}

export interface DemoService {
  readonly url: string;
  readonly port: number;
  /** The port asked for was taken and another was chosen. */
  readonly portFallback: boolean;
  readonly boundary: OrderBoundary;
  readonly db: DemoDatabase;
  readonly store: DemoStore;
  readonly downstreams: Downstreams;
  readonly orders: OrderService | InlineOrderService;
  /** Subscribes to the runtime's command events (no-op for the synchronous variant). */
  onCommandEvent(listener: (e: CommandEvent) => void): () => void;
  /** Stops the HTTP server, then the runtime gracefully (running commands finish), then the database. */
  close(): Promise<void>;
}

/**
 * Wires the order service: one database shared by the orders and the command store (so an order
 * and its commands commit together, in the transaction asynccmd opens), the asynccmd runtime with
 * the four executors, and one HTTP server with the order API, the admin API under /admin,
 * /metrics and /health.
 */
export async function startDemoService(options: DemoServiceOptions): Promise<DemoService> {
  const target = options.database ?? { dialect: 'sqlite', file: options.filename ?? ':memory:' };
  const db = await openDemoDatabase(target);
  const store = db.store;
  // The three stores differ only in their transaction handle, which the demo keeps opaque.
  const commandStore = store as CommandStore<unknown>;
  const downstreams = createDownstreams(db.session, options.profiles ?? DEFAULT_PROFILES, options.seed);
  const metrics = createMetrics({ store: commandStore });
  const admin = createAdminHandler({
    store: commandStore,
    prefix: ADMIN_BASE,
    // Loopback demo: no token, so every admin route is open to this machine (and only to it: the
    // handler serves loopback Host names and the page's own Origin only).
    auth: 'none',
    metrics,
    dashboard: true,
  });

  let boundary: OrderBoundary;
  let orders: OrderService | InlineOrderService;
  let runtime: { stop(): Promise<void>; on(l: (e: CommandEvent) => void): () => void } | null = null;
  if ((options.boundary ?? 'split') === 'split') {
    let gateway: CommandGateway | null = null;
    const service = new OrderService(
      db.session,
      {
        transaction: (fn) => (gateway as CommandGateway).transaction(fn),
        submitIdempotent: (tx, type, payload, o) =>
          (gateway as CommandGateway).submitIdempotent(tx, type, payload, o),
        workflow: (tx, id) => (gateway as CommandGateway).workflow(tx, id),
        getMany: (ids) => store.getMany(ids),
      },
      { projectionDelayMs: options.projectionDelayMs, adminBase: ADMIN_BASE },
    );
    const executors = orderExecutors(service, downstreams, options.retry ?? DEMO_RETRY, db.sessionOf);
    const commands = createAsyncCommands({
      store: commandStore,
      executors,
      owner: 'order-demo',
      leaseMs: options.leaseMs ?? 3_000,
      pollIntervalMs: options.pollIntervalMs ?? 100,
      sharedPool: { concurrency: options.sharedPoolSize ?? 32 },
      pools: { [EXTERNAL_POOL]: { concurrency: options.externalPoolSize ?? 16 } },
      logger: options.logger,
    });
    gateway = {
      transaction: (fn) => commands.client.transaction((tx) => fn(db.sessionOf(tx))),
      submitIdempotent: (tx, type, payload, o) =>
        commands.client.submitIdempotent(
          tx.handle,
          type,
          o.bizKey,
          payload,
          o.runAt ? { runAt: o.runAt } : undefined,
        ),
      workflow: (tx, id) => {
        const builder = commands.client.workflow(id);
        const open: OrderWorkflow = {
          step(name, type, payload, options) {
            builder.step(name, type, payload, options);
            return this;
          },
          // In the open client.transaction: its IMMEDIATE steps start after that commits.
          submit: () => builder.submitInTx(tx.handle),
        };
        return open;
      },
      getMany: (ids) => store.getMany(ids),
    };
    commands.on(metrics.listener);
    commands.start();
    runtime = commands;
    orders = service;
    boundary = {
      name: 'split',
      accept: (r) => service.accept(r),
      operation: (id) => service.operation(id),
      accepted: (order) => buildOperationView(order, [], [], { adminBase: ADMIN_BASE }),
      operations: (ids) => service.operations(ids),
      order: async (id) => {
        const order = await service.orders.byId(id);
        return order ? { order, operation: await service.viewOf(order) } : null;
      },
    };
  } else {
    const inline = new InlineOrderService(db.session, (fn) => db.transaction(fn), downstreams);
    orders = inline;
    const view = (o: Order) => buildOperationView(o, [], [], { adminBase: ADMIN_BASE });
    boundary = {
      name: 'synchronous',
      accept: (r) => inline.accept(r),
      operation: async (id) => {
        const order = await inline.orders.byOperationId(id);
        return order ? view(order) : null;
      },
      accepted: view,
      operations: async (ids) => (await inline.orders.byOperationIds(ids)).map(view),
      order: async (id) => {
        const order = await inline.orders.byId(id);
        return order ? { order, operation: view(order) } : null;
      },
    };
  }

  const server = createServer((req, res) => void route(boundary, admin, req, res));
  let listening: { port: number; fallback: boolean };
  try {
    listening = await listen(server, options.port ?? 0, options.movePortIfTaken ?? false);
  } catch (e) {
    // Nothing may outlive a failed start: the runtime is already polling the store.
    if (runtime) await runtime.stop();
    await db.close();
    throw e;
  }
  const { port, fallback } = listening;
  const url = `http://127.0.0.1:${port}`;
  let closing: Promise<void> | null = null;
  return {
    url,
    port,
    portFallback: fallback,
    boundary,
    db,
    store,
    downstreams,
    orders,
    onCommandEvent: (listener) => runtime?.on(listener) ?? (() => undefined),
    close: () =>
      (closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        if (runtime) await runtime.stop();
        await db.close();
      })()),
  };
}

async function route(
  boundary: OrderBoundary,
  admin: ReturnType<typeof createAdminHandler>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  try {
    const path = new URL(req.url ?? '/', 'http://demo.invalid').pathname;
    const method = req.method ?? 'GET';
    if (path === '/metrics' || path === '/health') {
      req.url = `${ADMIN_BASE}${path}`;
      return await admin(req, res);
    }
    if (path === ADMIN_BASE || path.startsWith(`${ADMIN_BASE}/`)) return await admin(req, res);
    if (path === '/orders') {
      if (method !== 'POST') throw new HttpError(405, 'method_not_allowed', 'POST /orders places an order');
      return await postOrder(boundary, req, res);
    }
    const op = /^\/operations\/([^/]+)$/.exec(path);
    if (op && method === 'GET') return await getOperation(boundary, decodeURIComponent(op[1] ?? ''), res);
    const order = /^\/orders\/([^/]+)$/.exec(path);
    if (order && method === 'GET') return await getOrder(boundary, decodeURIComponent(order[1] ?? ''), res);
    if (path === '/' && method === 'GET') {
      return sendJson(res, 200, {
        service: 'asynccmd order demo',
        boundary: boundary.name,
        routes: [
          'POST /orders',
          'GET /orders/:id',
          'GET /operations/:id',
          `GET ${ADMIN_BASE}/commands`,
          '/metrics',
          '/health',
        ],
      });
    }
    throw new HttpError(404, 'not_found', `no route ${method} ${path}`);
  } catch (e) {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (e instanceof HttpError) return sendError(res, e);
    sendError(res, new HttpError(500, 'internal_error', (e as Error).message ?? String(e)));
  }
}

async function listen(
  server: Server,
  port: number,
  movePortIfTaken: boolean,
): Promise<{ port: number; fallback: boolean }> {
  const attempt = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  try {
    return { port: await attempt(port), fallback: false };
  } catch (e) {
    if ((e as { code?: string }).code !== 'EADDRINUSE' || port === 0) throw e;
    if (!movePortIfTaken) throw new PortTakenError(port);
    return { port: await attempt(0), fallback: true };
  }
}
