import { CommandNotFoundError, InvalidArgumentError, type CommandStore, type Logger } from '@asynccmd/core';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { publicHealthReport, type HealthReport } from '../health.js';
import { sendJson } from '../http-response.js';
import { requireCommandId } from '../validation.js';
import { DASHBOARD_SECURITY_HEADERS, loadDashboardAssets, sendAsset } from './assets.js';
import { parseBulkRetry, retryDeadLetters } from './bulk-retry.js';
import { createSummaryReader, shareSummary } from './summary.js';

export interface DashboardOptions {
  /**
   * How often the one summary every open page shows (health, counts, charts, dead letters) is read
   * from the store while someone looks. Pages ask that often and share the answer. Default 5 s.
   */
  readonly refreshMs?: number;
  /** The span of the throughput and latency charts. Default 15 minutes. */
  readonly windowMs?: number;
  /** One bar of the charts; `windowMs` is a whole number of them (at most 120). Default 1 minute. */
  readonly bucketMs?: number;
  /** Dead letters listed on the overview. Default 10. */
  readonly deadLetters?: number;
}

/** A route of the admin handler's, as it dispatches them (see admin-handler.ts). */
export interface DashboardRoute {
  readonly method: 'GET' | 'POST';
  readonly access: 'public' | 'protected';
  readonly handle: (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    caller: { readonly authenticated: boolean },
  ) => Promise<void>;
}

export interface DashboardContext {
  readonly store: CommandStore;
  readonly health: () => Promise<HealthReport>;
  readonly linkBase: string;
  readonly logger: Logger;
  readonly readJsonBody: (req: IncomingMessage) => Promise<Record<string, unknown>>;
}

export interface Dashboard {
  route(path: string): DashboardRoute | undefined;
}

interface DashboardSettings {
  readonly refreshMs: number;
  readonly windowMs: number;
  readonly bucketMs: number;
  readonly deadLetters: number;
}

const MAX_BUCKETS = 120;

function resolveDashboardOptions(option: boolean | DashboardOptions | undefined): DashboardSettings | null {
  if (option === undefined || option === false) return null;
  const o: DashboardOptions = option === true ? {} : option;
  if (typeof o !== 'object' || o === null) {
    throw new InvalidArgumentError('dashboard must be true, false or an options object');
  }
  const whole = (what: keyof DashboardOptions, fallback: number, min: number, max: number): number => {
    const n: unknown = o[what] ?? fallback;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`dashboard.${what} must be a whole number from ${min} to ${max}`);
    }
    return n;
  };
  const refreshMs = whole('refreshMs', 5_000, 100, 3_600_000);
  const bucketMs = whole('bucketMs', 60_000, 100, 86_400_000);
  const windowMs = whole('windowMs', 15 * 60_000, bucketMs, bucketMs * MAX_BUCKETS);
  if (windowMs % bucketMs !== 0) {
    throw new InvalidArgumentError('dashboard.windowMs must be a whole number of dashboard.bucketMs');
  }
  return { refreshMs, windowMs, bucketMs, deadLetters: whole('deadLetters', 10, 1, 100) };
}

/**
 * The dashboard's routes under `/dashboard`: the page and its files are public (they hold no data),
 * everything under `/dashboard/api` needs the token like the rest of the admin API. Null when the
 * dashboard is off.
 */
export function createDashboard(
  option: boolean | DashboardOptions | undefined,
  ctx: DashboardContext,
): Dashboard | null {
  const settings = resolveDashboardOptions(option);
  if (settings === null) return null;
  const assets = loadDashboardAssets(ctx.linkBase);
  const summary = shareSummary(
    createSummaryReader({
      store: ctx.store,
      health: ctx.health,
      linkBase: ctx.linkBase,
      logger: ctx.logger,
      refreshMs: settings.refreshMs,
      windowMs: settings.windowMs,
      bucketMs: settings.bucketMs,
      deadLetterLimit: settings.deadLetters,
    }),
    settings.refreshMs,
    // A page asks every refreshMs while visible; a few missed asks mean it is gone or hidden.
    settings.refreshMs * 3 + 1_000,
  );

  const api = new Map<string, DashboardRoute>([
    [
      '/dashboard/api/summary',
      {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res, _url, caller) => {
          const answer = await summary.current();
          // The database's own words stay with callers who showed the token, as on /health.
          const health = caller.authenticated ? answer.health : publicHealthReport(answer.health);
          sendJson(res, 200, { ...answer, health }, DASHBOARD_SECURITY_HEADERS);
        },
      },
    ],
    [
      '/dashboard/api/retry',
      {
        method: 'POST',
        access: 'protected',
        handle: async (req, res) => {
          const ids = parseBulkRetry(await ctx.readJsonBody(req));
          sendJson(res, 200, await retryDeadLetters(ctx.store, ids, ctx.logger), DASHBOARD_SECURITY_HEADERS);
        },
      },
    ],
  ]);

  const contents = (id: string): DashboardRoute => ({
    method: 'GET',
    access: 'protected',
    handle: async (_req, res) => {
      const commandId = requireCommandId(id);
      const [c, workflow] = await Promise.all([
        ctx.store.get(commandId),
        ctx.store.dependencies?.workflowOf(commandId) ?? null,
      ]);
      if (c === null) throw new CommandNotFoundError(commandId);
      // What the status resource leaves out, and the workflow the command is a step of (null:
      // none); the claim token never leaves the store.
      sendJson(
        res,
        200,
        {
          id: c.id,
          payload: c.payload,
          headers: c.headers,
          idempotent: c.idempotent,
          leaseUntil: c.leaseUntil?.toISOString() ?? null,
          workflow,
        },
        DASHBOARD_SECURITY_HEADERS,
      );
    },
  });

  return {
    route(path) {
      if (path !== '/dashboard' && !path.startsWith('/dashboard/')) return undefined;
      const asset = assets.get(path.slice('/dashboard'.length));
      if (asset !== undefined) {
        return { method: 'GET', access: 'public', handle: async (req, res) => sendAsset(req, res, asset) };
      }
      const m = /^\/dashboard\/api\/commands\/([^/]+)\/contents$/.exec(path);
      // Ids are digits: an encoded segment is not one, and requireCommandId says so.
      if (m !== null) return contents(m[1] ?? '');
      return api.get(path);
    },
  };
}
