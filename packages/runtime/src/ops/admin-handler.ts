import { InvalidArgumentError, silentLogger, type CommandStore, type Logger } from '@asynccmd/core';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  fixedRoutes,
  parameterRoute,
  readJsonBody,
  type AdminRouteContext,
  type MetricsSource,
  type Route,
} from './admin-routes.js';
import { bearerMatches, resolveAdminAuth, type AdminAuthOptions } from './auth.js';
import { createDashboard, type DashboardOptions } from './dashboard/dashboard.js';
import { createHealthCheck, type HealthOptions } from './health.js';
import { describeHttpError, HttpError, sendJson } from './http-response.js';
import { resolvePublicStatusOptions, type PublicStatusHandlerOptions } from './public-status.js';
import { createRequestGuard, type RequestGuardOptions } from './request-guard.js';
import { parseMountPath } from './validation.js';

/** Everything but how callers authenticate (see AdminAuthOptions: a token, or `auth: 'none'`). */
export interface AdminHandlerSettings extends RequestGuardOptions {
  readonly store: CommandStore;
  /**
   * Let anyone holding a link read `GET /status/<reference>`: the status an API client follows
   * after a 202, without error text, addressed by an unguessable reference made with this secret
   * (build the link with `publicStatusPath`), and a workflow's at `GET /status/workflows/<reference>`
   * (`publicWorkflowStatusPath`). `GET /commands/:id` and `GET /workflows/:id` stay behind the
   * token. Results are shown there only with `result: true`.
   */
  readonly publicStatus?: PublicStatusHandlerOptions;
  /** Let anyone scrape `GET /metrics`. Default false. `GET /health` is always public, for probes. */
  readonly publicMetrics?: boolean;
  /** Path the routes live under, e.g. '/ops' → '/ops/commands/42'. Default ''. */
  readonly prefix?: string;
  /**
   * Base of the links in answers, when it differs from `prefix` (e.g. Express's `app.use('/ops', h)`
   * strips '/ops' from req.url: pass prefix '' and linkBase '/ops'). Default: `prefix`.
   */
  readonly linkBase?: string;
  readonly health?: HealthOptions;
  /**
   * The command types `POST /schedules/:name/add` and `POST /types/:type/pause` accept (e.g. the
   * runtime's executors'; others are UNKNOWN_COMMAND_TYPE, a 400; a resume takes any). Default:
   * any well-formed type — the handler cannot know which types some instance executes.
   */
  readonly scheduleTypes?: readonly string[];
  /**
   * The metrics to serve: `createMetrics()` of @asynccmd/runtime/metrics, whose `listener` you
   * subscribe to the runtime's events for the counters and histograms. Default: its gauges read
   * from the store only, made on the first scrape (prom-client is loaded only then).
   */
  readonly metrics?: MetricsSource;
  /**
   * Serve the web dashboard at `/dashboard` (under the prefix). Off by default: it adds public
   * routes for the page's files (the data behind them needs the token like every other route).
   */
  readonly dashboard?: boolean | DashboardOptions;
  /** Retry-After (seconds) sent with a status that is not terminal yet. Default 2. */
  readonly statusRetryAfterSeconds?: number;
  readonly logger?: Logger;
}

export type AdminHandlerOptions = AdminHandlerSettings & AdminAuthOptions;

export type { MetricsSource } from './admin-routes.js';

/**
 * A plain Node handler. With `next` (Express/Connect style) it passes on requests outside its
 * routes; without, it answers them 404.
 */
export type AdminHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  next?: (error?: unknown) => void,
) => Promise<void>;

// Form posts and fetches without a preflight can send no other type (nor none): a page on another
// origin cannot make a mutation look like JSON.
const JSON_TYPE = /^application\/json[ \t]*(;|$)/i;

export function createAdminHandler(options: AdminHandlerOptions): AdminHandler {
  const { store } = options;
  const token = resolveAdminAuth(options);
  const guard = createRequestGuard(options, token === null);
  const prefix = parseMountPath('prefix', options.prefix ?? '');
  const linkBase = parseMountPath('linkBase', options.linkBase ?? prefix);
  const publicStatus =
    options.publicStatus === undefined ? null : resolvePublicStatusOptions(options.publicStatus);
  const logger = options.logger ?? silentLogger;
  const retryAfterSeconds = options.statusRetryAfterSeconds ?? 2;
  if (!Number.isSafeInteger(retryAfterSeconds) || retryAfterSeconds < 0) {
    throw new InvalidArgumentError('statusRetryAfterSeconds must be a whole number of seconds ≥ 0');
  }
  const retryAfter = String(retryAfterSeconds);
  const metrics = metricsLoader(options.metrics, store, logger);
  const health = createHealthCheck(store, options.health, logger);
  const dashboard = createDashboard(options.dashboard, { store, health, linkBase, logger, readJsonBody });

  const context: AdminRouteContext = {
    store,
    linkBase,
    logger,
    retryAfter,
    scheduleTypes: options.scheduleTypes ?? null,
    publicStatus,
  };
  const fixed = fixedRoutes(context, health, metrics, options.publicMetrics === true);
  const route = (path: string): Route | undefined =>
    fixed.get(path) ?? dashboard?.route(path) ?? parameterRoute(context, path);

  return async (req, res, next) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://admin.invalid');
    } catch {
      return respondError(res, new InvalidArgumentError('malformed request URL'), logger);
    }
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const inside = prefix === '' || path === prefix || path.startsWith(`${prefix}/`);
    try {
      const r = inside ? route(path.slice(prefix.length) || '/') : undefined;
      // Requests outside these routes are the application's: none of the checks below are ours to make.
      if (r === undefined && next !== undefined) return next();
      guard.check(req);
      const authenticated = token !== null && bearerMatches(req.headers.authorization, token);
      const fits =
        r !== undefined && (req.method === r.method || (r.method === 'GET' && req.method === 'HEAD'));
      // The token first: without it, a 404 or 405 would tell a stranger which routes exist.
      if (token !== null && !authenticated && !(fits && r.access === 'public')) {
        throw new HttpError(401, 'UNAUTHORIZED', 'a valid bearer token is required', {
          'WWW-Authenticate': 'Bearer realm="asynccmd"',
        });
      }
      if (r === undefined) {
        throw new HttpError(404, 'ROUTE_NOT_FOUND', `no route ${req.method ?? ''} ${path.slice(0, 200)}`);
      }
      if (!fits) {
        throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${path} answers ${r.method} only`, {
          Allow: r.method,
        });
      }
      if (r.method === 'POST' && !JSON_TYPE.test(req.headers['content-type'] ?? '')) {
        throw new HttpError(
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          'send mutations with Content-Type: application/json',
        );
      }
      await r.handle(req, res, url, { authenticated });
    } catch (e) {
      respondError(res, e, logger);
    }
  };
}

function respondError(res: ServerResponse, e: unknown, logger: Logger): void {
  const answer = describeHttpError(e);
  if (answer.internal) logger.error({ err: e }, 'asynccmd admin request failed');
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, answer.status, answer.body, answer.headers);
}

/**
 * What `GET /metrics` serves. Without `metrics` given, the store gauges of
 * @asynccmd/runtime/metrics, made on the first scrape: prom-client is loaded only when metrics are
 * asked for, and where it is not installed the route answers 501 METRICS_UNAVAILABLE.
 */
function metricsLoader(
  given: MetricsSource | undefined,
  store: CommandStore,
  logger: Logger,
): () => Promise<MetricsSource> {
  if (given !== undefined) return () => Promise.resolve(given);
  let made: Promise<MetricsSource> | null = null;
  return () =>
    (made ??= import('./metrics.js').then(
      ({ createMetrics }) => createMetrics({ store }),
      (error: unknown) => {
        logger.warn(
          { err: error },
          'asynccmd admin: GET /metrics needs prom-client (npm install prom-client) or the `metrics` option',
        );
        throw new HttpError(
          501,
          'METRICS_UNAVAILABLE',
          'metrics are not available: prom-client is not installed',
        );
      },
    ));
}
