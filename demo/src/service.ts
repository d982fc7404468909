import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { configureConnection, createSqliteStore, type SqliteCommandStore } from '@asynccmd/adapter-sqlite';
import type { CommandEvent, Logger } from '@asynccmd/core';
import { createAdminHandler, createAsyncCommands } from '@asynccmd/runtime';
import { createMetrics } from '@asynccmd/runtime/metrics';
import Database from 'better-sqlite3';
import {
  createDownstreams,
  DEFAULT_PROFILES,
  type Downstreams,
  type DownstreamProfiles,
} from './downstream.js';
import type { CommandGateway } from './domain/gateway.js';
import { InlineOrderService } from './domain/inline-order-service.js';
import { buildOperationView } from './domain/operation-view.js';
import { OrderService } from './domain/order-service.js';
import { migrateOrderSchema } from './domain/schema.js';
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
  /** The SQLite file holding the orders and the command table. */
  readonly filename: string;
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
  readonly db: Database.Database;
  readonly store: SqliteCommandStore;
  readonly downstreams: Downstreams;
  readonly orders: OrderService | InlineOrderService;
  /** Subscribes to the runtime's command events (no-op for the synchronous variant). */
  onCommandEvent(listener: (e: CommandEvent) => void): () => void;
  /** Stops the HTTP server, then the runtime gracefully (running commands finish), then SQLite. */
  close(): Promise<void>;
}

/**
 * Wires the order service: one SQLite connection shared by the orders and the command store (so an
 * order and its commands commit together), the asynccmd runtime with the four executors, and one
 * HTTP server with the order API, the admin API under /admin, /metrics and /health.
 */
export async function startDemoService(options: DemoServiceOptions): Promise<DemoService> {
  const db = new Database(options.filename);
  configureConnection(db);
  migrateOrderSchema(db);
  const store = createSqliteStore({ database: db });
  await store.migrate();
  const downstreams = createDownstreams(db, options.profiles ?? DEFAULT_PROFILES, options.seed);
  const metrics = createMetrics({ store });
  const admin = createAdminHandler({
    store,
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
      db,
      {
        transaction: (fn) => (gateway as CommandGateway).transaction(fn),
        submitIdempotent: (tx, type, payload, o) =>
          (gateway as CommandGateway).submitIdempotent(tx, type, payload, o),
        getMany: (ids) => store.getMany(ids),
      },
      { projectionDelayMs: options.projectionDelayMs, adminBase: ADMIN_BASE },
    );
    const executors = orderExecutors(service, downstreams, options.retry ?? DEMO_RETRY);
    const commands = createAsyncCommands({
      store,
      executors,
      owner: 'order-demo',
      leaseMs: options.leaseMs ?? 3_000,
      pollIntervalMs: options.pollIntervalMs ?? 100,
      sharedPool: { concurrency: options.sharedPoolSize ?? 32 },
      pools: { [EXTERNAL_POOL]: { concurrency: options.externalPoolSize ?? 16 } },
      logger: options.logger,
    });
    gateway = {
      transaction: (fn) => commands.client.transaction((tx) => fn(tx)),
      submitIdempotent: (tx, type, payload, o) =>
        commands.client.submitIdempotent(
          tx,
          type,
          o.bizKey,
          payload,
          o.runAt ? { runAt: o.runAt } : undefined,
        ),
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
      operations: (ids) => service.operations(ids),
      order: async (id) => {
        const order = service.orders.byId(id);
        return order ? { order, operation: await service.viewOf(order) } : null;
      },
    };
  } else {
    const inline = new InlineOrderService(db, downstreams);
    orders = inline;
    const view = (o: ReturnType<typeof inline.orders.byId>) =>
      o ? buildOperationView(o, [], [], { adminBase: ADMIN_BASE }) : null;
    boundary = {
      name: 'synchronous',
      accept: (r) => inline.accept(r),
      operation: async (id) => view(inline.orders.byOperationId(id)),
      operations: async (ids) =>
        inline.orders
          .byOperationIds(ids)
          .map((o) => buildOperationView(o, [], [], { adminBase: ADMIN_BASE })),
      order: async (id) => {
        const order = inline.orders.byId(id);
        return order ? { order, operation: view(order) as NonNullable<ReturnType<typeof view>> } : null;
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
    await store.close();
    if (db.open) db.close();
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
        await store.close();
        if (db.open) db.close();
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
