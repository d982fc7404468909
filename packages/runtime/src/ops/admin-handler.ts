import {
  ADMIN_TRANSITIONS,
  CommandNotFoundError,
  InvalidArgumentError,
  requireScheduleName,
  ScheduleNotFoundError,
  silentLogger,
  type AdminTransition,
  type CommandStore,
  type Logger,
} from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { applyAdminTransition } from './admin-actions.js';
import { bearerMatches, resolveAdminAuth, type AdminAuthOptions } from './auth.js';
import { createDashboard, type DashboardOptions } from './dashboard/dashboard.js';
import { createHealthCheck, publicHealthReport, type HealthOptions } from './health.js';
import { describeHttpError, HttpError, sendJson, sendText } from './http-response.js';
import {
  resolvePublicStatusOptions,
  resolvePublicStatusReference,
  toPublicStatus,
  type PublicStatusHandlerOptions,
  type PublicStatusSettings,
} from './public-status.js';
import { createRequestGuard, type RequestGuardOptions } from './request-guard.js';
import {
  addSchedule,
  readSchedules,
  removeSchedule,
  schedulesOf,
  setSchedulePaused,
  toScheduleView,
} from './schedules-view.js';
import { readStats } from './stats-view.js';
import { toStatusListItem, toStatusResource } from './status-resource.js';
import { readPausedTypes, setTypePaused } from './type-pauses-view.js';
import { parseListQuery, parseMountPath, parseReason, requireCommandId } from './validation.js';

/** Everything but how callers authenticate (see AdminAuthOptions: a token, or `auth: 'none'`). */
export interface AdminHandlerSettings extends RequestGuardOptions {
  readonly store: CommandStore;
  /**
   * Let anyone holding a link read `GET /status/<reference>`: the status an API client follows
   * after a 202, without error text, addressed by an unguessable reference made with this secret
   * (build the link with `publicStatusPath`). `GET /commands/:id` stays behind the token. The
   * command's result is shown there only with `result: true`.
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
   * The command types `POST /schedules/:name/add` accepts (e.g. the runtime's executors'). Default:
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

/** What `GET /metrics` serves; the metrics of @asynccmd/runtime/metrics are one. */
export interface MetricsSource {
  /** The Content-Type of the text. */
  readonly contentType: string;
  /** The Prometheus text exposition. */
  metrics(): Promise<string>;
}

/**
 * A plain Node handler. With `next` (Express/Connect style) it passes on requests outside its
 * routes; without, it answers them 404.
 */
export type AdminHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  next?: (error?: unknown) => void,
) => Promise<void>;

const MAX_BODY_BYTES = 16 * 1024;

type Access = 'public' | 'protected';
/** What a route knows of its caller: whether they showed the token (always false without one). */
interface Caller {
  readonly authenticated: boolean;
}
interface Route {
  readonly method: 'GET' | 'POST';
  readonly access: Access;
  readonly handle: (req: IncomingMessage, res: ServerResponse, url: URL, caller: Caller) => Promise<void>;
}

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

  const showStatus = async (_req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
    const commandId = requireCommandId(id);
    const command = await store.get(commandId);
    if (command === null) throw new CommandNotFoundError(commandId);
    const view = toStatusResource(command, linkBase);
    sendJson(res, 200, view, view.terminal ? {} : { 'Retry-After': retryAfter });
  };

  // A forged, foreign or stale reference and a missing command answer alike: nothing to count on.
  const showPublicStatus = async (
    res: ServerResponse,
    reference: string,
    settings: PublicStatusSettings,
  ): Promise<void> => {
    const id = resolvePublicStatusReference(reference, settings.secret);
    const command = id === null ? null : await store.get(id);
    if (command === null) throw new HttpError(404, 'NOT_FOUND', 'no such status resource');
    const selfPath = `${linkBase}/status/${reference}`;
    const view = toPublicStatus(command, reference, selfPath, settings.showResult);
    sendJson(res, 200, view, view.terminal ? {} : { 'Retry-After': retryAfter });
  };

  const transition =
    (name: AdminTransition) =>
    async (req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
      const commandId = requireCommandId(id);
      const body = await readJsonBody(req);
      const allowed = name === 'kill' || name === 'cancel' ? ['reason'] : [];
      for (const key of Object.keys(body)) {
        if (!allowed.includes(key)) {
          throw new InvalidArgumentError(
            `${name} takes ${allowed.length ? 'only "reason"' : 'no body fields'}, not ${JSON.stringify(key.slice(0, 40))}`,
          );
        }
      }
      const result = await applyAdminTransition(store, name, commandId, parseReason(body['reason']));
      if (E.isLeft(result)) throw result.left;
      logger.info({ commandId, transition: name, status: result.right.status }, 'admin transition');
      sendJson(res, 200, toStatusResource(result.right, linkBase));
    };

  // Pause and resume are judged on this process's clock: a resume skips the ticks before it.
  const scheduleAction =
    (paused: boolean) =>
    async (req: IncomingMessage, res: ServerResponse, name: string): Promise<void> => {
      const body = await readJsonBody(req);
      const extra = Object.keys(body)[0];
      if (extra !== undefined) {
        throw new InvalidArgumentError(
          `${paused ? 'pause' : 'resume'} takes no body fields, not ${JSON.stringify(extra.slice(0, 40))}`,
        );
      }
      const view = await setSchedulePaused(store, name, paused, new Date());
      logger.info({ schedule: view.name, paused }, 'admin schedule change');
      sendJson(res, 200, view);
    };

  // A type need not be one this process executes: another service may run it.
  const typeAction =
    (paused: boolean) =>
    async (req: IncomingMessage, res: ServerResponse, type: string): Promise<void> => {
      const body = await readJsonBody(req);
      const extra = Object.keys(body).find((key) => !paused || key !== 'reason');
      if (extra !== undefined) {
        throw new InvalidArgumentError(
          `${paused ? 'pause takes only "reason"' : 'resume takes no body fields'}, not ${JSON.stringify(extra.slice(0, 40))}`,
        );
      }
      const change = await setTypePaused(store, type, paused, paused ? body['reason'] : undefined);
      logger.info({ type: change.type, paused, changed: change.changed }, 'admin type pause change');
      sendJson(res, 200, change);
    };

  const addScheduleNamed = async (req: IncomingMessage, res: ServerResponse, name: string): Promise<void> => {
    const body = await readJsonBody(req);
    if ('name' in body)
      throw new InvalidArgumentError('the name of a new schedule is in its path, not its body');
    const view = await addSchedule(store, { ...body, name }, new Date(), options.scheduleTypes ?? null);
    logger.info({ schedule: view.name, type: view.type, cron: view.cron }, 'admin schedule added');
    sendJson(res, 201, view);
  };

  const removeScheduleNamed = async (
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
  ): Promise<void> => {
    const extra = Object.keys(await readJsonBody(req))[0];
    if (extra !== undefined) {
      throw new InvalidArgumentError(
        `remove takes no body fields, not ${JSON.stringify(extra.slice(0, 40))}`,
      );
    }
    const result = await removeSchedule(store, name);
    logger.info({ schedule: result.name }, 'admin schedule removed');
    sendJson(res, 200, result);
  };

  const showSchedule = async (res: ServerResponse, name: string): Promise<void> => {
    const record = await schedulesOf(store).get(requireScheduleName(name));
    if (record === null) throw new ScheduleNotFoundError(name);
    sendJson(res, 200, toScheduleView(record, new Date()));
  };

  const fixed = new Map<string, Route>(
    Object.entries({
      '/health': {
        method: 'GET',
        access: 'public',
        handle: async (_req, res, _url, caller) => {
          const report = await health();
          sendJson(
            res,
            report.status === 'UP' ? 200 : 503,
            caller.authenticated ? report : publicHealthReport(report),
          );
        },
      },
      '/metrics': {
        method: 'GET',
        access: options.publicMetrics ? 'public' : 'protected',
        handle: async (_req, res) => {
          const source = await metrics();
          sendText(res, 200, source.contentType, await source.metrics());
        },
      },
      '/stats': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res) => sendJson(res, 200, await readStats(store)),
      },
      '/schedules': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res) => sendJson(res, 200, { items: await readSchedules(store, new Date()) }),
      },
      '/types/paused': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res) => sendJson(res, 200, { items: await readPausedTypes(store) }),
      },
      '/commands': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res, url) => {
          const query = parseListQuery(url.searchParams);
          const page = await store.list(query);
          const next = new URLSearchParams(url.searchParams);
          if (page.nextCursor !== null) next.set('cursor', page.nextCursor);
          sendJson(res, 200, {
            items: page.items.map((c) => toStatusListItem(c, linkBase)),
            nextCursor: page.nextCursor,
            links: { next: page.nextCursor === null ? null : `${linkBase}/commands?${next.toString()}` },
          });
        },
      },
    } satisfies Record<string, Route>),
  );

  const route = (path: string): Route | undefined => {
    const known = fixed.get(path) ?? dashboard?.route(path);
    if (known !== undefined) return known;
    const reference = /^\/status\/([^/]+)$/.exec(path);
    if (reference !== null && publicStatus !== null) {
      const text = decodeSegment(reference[1] ?? '');
      return {
        method: 'GET',
        access: 'public',
        handle: (_req, res) => showPublicStatus(res, text, publicStatus),
      };
    }
    const schedule = /^\/schedules\/([^/]+)(?:\/(pause|resume|add|remove))?$/.exec(path);
    if (schedule !== null) {
      const name = decodeSegment(schedule[1] ?? '');
      const action = schedule[2];
      if (action === undefined) {
        return { method: 'GET', access: 'protected', handle: (_req, res) => showSchedule(res, name) };
      }
      const act =
        action === 'add'
          ? addScheduleNamed
          : action === 'remove'
            ? removeScheduleNamed
            : scheduleAction(action === 'pause');
      return { method: 'POST', access: 'protected', handle: (req, res) => act(req, res, name) };
    }
    const typed = /^\/types\/([^/]+)\/(pause|resume)$/.exec(path);
    if (typed !== null) {
      const segment = typed[1] ?? '';
      const act = typeAction(typed[2] === 'pause');
      return {
        method: 'POST',
        access: 'protected',
        // Decoded only once the caller is known: a stranger learns nothing from a 400.
        handle: (req, res) => act(req, res, decodeTextSegment('type', segment)),
      };
    }
    const m = /^\/commands\/([^/]+)(?:\/([^/]+))?$/.exec(path);
    if (m === null) return undefined;
    const id = decodeSegment(m[1] ?? '');
    const action = m[2];
    if (action === undefined) {
      return { method: 'GET', access: 'protected', handle: (req, res) => showStatus(req, res, id) };
    }
    if (!(ADMIN_TRANSITIONS as readonly string[]).includes(action)) return undefined;
    const act = transition(action as AdminTransition);
    return { method: 'POST', access: 'protected', handle: (req, res) => act(req, res, id) };
  };

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

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    // Not even text: parseCommandId will refuse it with a 400.
    return segment;
  }
}

/**
 * A path segment that is free text (a type may hold any character, '/' as %2F): a bad encoding is
 * refused, never taken as the literal text it failed to decode.
 */
function decodeTextSegment(what: string, segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new InvalidArgumentError(`the ${what} in the path is not percent-encoded UTF-8`);
  }
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

/** An optional JSON object body, at most 16 KiB. */
async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) {
    throw new HttpError(413, 'BODY_TOO_LARGE', `request body over ${MAX_BODY_BYTES} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, 'BODY_TOO_LARGE', `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(buf);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new InvalidArgumentError('request body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidArgumentError('request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}
