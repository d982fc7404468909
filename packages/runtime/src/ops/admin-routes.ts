import {
  ADMIN_TRANSITIONS,
  CommandNotFoundError,
  InvalidArgumentError,
  requireScheduleName,
  ScheduleNotFoundError,
  type AdminTransition,
  type CommandStore,
  type Logger,
} from '@asynccmd/core';
import * as E from 'fp-ts/lib/Either.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { applyAdminTransition } from './admin-actions.js';
import { publicHealthReport, type HealthReport } from './health.js';
import { HttpError, sendJson, sendText } from './http-response.js';
import { resolvePublicStatusReference, toPublicStatus, type PublicStatusSettings } from './public-status.js';
import {
  addSchedule,
  readSchedules,
  removeSchedule,
  schedulesOf,
  setSchedulePaused,
  toScheduleView,
} from './schedules-view.js';
import { setKeyLimit, setKeyRateLimit, setRateLimit } from './flow-limits-view.js';
import { readStats } from './stats-view.js';
import { toStatusListItem, toStatusResource } from './status-resource.js';
import { readPausedTypes, setTypePaused } from './type-pauses-view.js';
import { parseListQuery, parseReason, requireCommandId } from './validation.js';
import { cancelWorkflowView, readWorkflow } from './workflows-view.js';
import { resolvePublicWorkflowReference, toPublicWorkflowStatus } from './public-workflow-status.js';
import { workflowStatus } from '../workflow.js';

/** What `GET /metrics` serves; the metrics of @asynccmd/runtime/metrics are one. */
export interface MetricsSource {
  /** The Content-Type of the text. */
  readonly contentType: string;
  /** The Prometheus text exposition. */
  metrics(): Promise<string>;
}

/** What the admin routes answer from: the handler's settings, resolved once. */
export interface AdminRouteContext {
  readonly store: CommandStore;
  /** Base of the links in answers. */
  readonly linkBase: string;
  readonly logger: Logger;
  /** Retry-After (seconds, as text) sent with a status that is not terminal yet. */
  readonly retryAfter: string;
  /** The types schedules and type pauses accept; null: any well-formed type. */
  readonly scheduleTypes: readonly string[] | null;
  /** `GET /status/<reference>`, where it is served. */
  readonly publicStatus: PublicStatusSettings | null;
}

const MAX_BODY_BYTES = 16 * 1024;

export type Access = 'public' | 'protected';
/** What a route knows of its caller: whether they showed the token (always false without one). */
export interface Caller {
  readonly authenticated: boolean;
}
export interface Route {
  readonly method: 'GET' | 'POST';
  readonly access: Access;
  readonly handle: (req: IncomingMessage, res: ServerResponse, url: URL, caller: Caller) => Promise<void>;
}

async function showStatus(ctx: AdminRouteContext, res: ServerResponse, id: string): Promise<void> {
  const commandId = requireCommandId(id);
  const command = await ctx.store.get(commandId);
  if (command === null) throw new CommandNotFoundError(commandId);
  const view = toStatusResource(command, ctx.linkBase);
  sendJson(res, 200, view, view.terminal ? {} : { 'Retry-After': ctx.retryAfter });
}

// A forged, foreign or stale reference and a missing command answer alike: nothing to count on.
async function showPublicStatus(
  ctx: AdminRouteContext,
  res: ServerResponse,
  reference: string,
  settings: PublicStatusSettings,
): Promise<void> {
  const id = resolvePublicStatusReference(reference, settings.secret);
  const command = id === null ? null : await ctx.store.get(id);
  if (command === null) throw new HttpError(404, 'NOT_FOUND', 'no such status resource');
  const selfPath = `${ctx.linkBase}/status/${reference}`;
  const view = toPublicStatus(command, reference, selfPath, settings.showResult);
  sendJson(res, 200, view, view.terminal ? {} : { 'Retry-After': ctx.retryAfter });
}

// As for a command: a forged, foreign or stale reference and a missing workflow answer alike.
async function showPublicWorkflowStatus(
  ctx: AdminRouteContext,
  res: ServerResponse,
  reference: string,
  settings: PublicStatusSettings,
): Promise<void> {
  const id = resolvePublicWorkflowReference(reference, settings.secret);
  const workflow = id === null ? null : await workflowStatus(ctx.store, id);
  if (workflow === null) throw new HttpError(404, 'NOT_FOUND', 'no such status resource');
  const selfPath = `${ctx.linkBase}/status/workflows/${reference}`;
  const view = toPublicWorkflowStatus(workflow, reference, selfPath, settings.showResult);
  sendJson(res, 200, view, view.terminal ? {} : { 'Retry-After': ctx.retryAfter });
}

function transition(ctx: AdminRouteContext, name: AdminTransition) {
  return async (req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
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
    const result = await applyAdminTransition(ctx.store, name, commandId, parseReason(body['reason']));
    if (E.isLeft(result)) throw result.left;
    ctx.logger.info({ commandId, transition: name, status: result.right.status }, 'admin transition');
    sendJson(res, 200, toStatusResource(result.right, ctx.linkBase));
  };
}

// Pause and resume are judged on this process's clock: a resume skips the ticks before it.
function scheduleAction(ctx: AdminRouteContext, paused: boolean) {
  return async (req: IncomingMessage, res: ServerResponse, name: string): Promise<void> => {
    const body = await readJsonBody(req);
    const extra = Object.keys(body)[0];
    if (extra !== undefined) {
      throw new InvalidArgumentError(
        `${paused ? 'pause' : 'resume'} takes no body fields, not ${JSON.stringify(extra.slice(0, 40))}`,
      );
    }
    const view = await setSchedulePaused(ctx.store, name, paused, new Date());
    ctx.logger.info({ schedule: view.name, paused }, 'admin schedule change');
    sendJson(res, 200, view);
  };
}

// Without scheduleTypes, a type need not be one this process knows: another service may run it.
function typeAction(ctx: AdminRouteContext, paused: boolean) {
  return async (req: IncomingMessage, res: ServerResponse, type: string): Promise<void> => {
    const body = await readJsonBody(req);
    const extra = Object.keys(body).find((key) => !paused || key !== 'reason');
    if (extra !== undefined) {
      throw new InvalidArgumentError(
        `${paused ? 'pause takes only "reason"' : 'resume takes no body fields'}, not ${JSON.stringify(extra.slice(0, 40))}`,
      );
    }
    const change = await setTypePaused(
      ctx.store,
      type,
      paused,
      paused ? body['reason'] : undefined,
      ctx.scheduleTypes,
    );
    ctx.logger.info({ type: change.type, paused, changed: change.changed }, 'admin type pause change');
    sendJson(res, 200, change);
  };
}

async function addScheduleNamed(
  ctx: AdminRouteContext,
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
): Promise<void> {
  const body = await readJsonBody(req);
  if ('name' in body)
    throw new InvalidArgumentError('the name of a new schedule is in its path, not its body');
  const view = await addSchedule(ctx.store, { ...body, name }, new Date(), ctx.scheduleTypes);
  ctx.logger.info({ schedule: view.name, type: view.type, cron: view.cron }, 'admin schedule added');
  sendJson(res, 201, view);
}

async function removeScheduleNamed(
  ctx: AdminRouteContext,
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
): Promise<void> {
  const extra = Object.keys(await readJsonBody(req))[0];
  if (extra !== undefined) {
    throw new InvalidArgumentError(`remove takes no body fields, not ${JSON.stringify(extra.slice(0, 40))}`);
  }
  const result = await removeSchedule(ctx.store, name);
  ctx.logger.info({ schedule: result.name }, 'admin schedule removed');
  sendJson(res, 200, result);
}

/**
 * Stores a flow limit of a type (`set`: flow-limits-view.ts) for every instance at once: claims
 * read the stored limit. An instance that starts later declares its own options' limits again.
 */
function flowLimitRoute(
  ctx: AdminRouteContext,
  what: string,
  set: (store: CommandStore, type: string, change: Record<string, unknown>) => Promise<{ type: string }>,
): (req: IncomingMessage, res: ServerResponse, type: string) => Promise<void> {
  return async (req, res, type) => {
    const stored = await set(ctx.store, type, await readJsonBody(req));
    ctx.logger.info({ ...stored }, `admin ${what} set`);
    sendJson(res, 200, stored);
  };
}

async function showSchedule(ctx: AdminRouteContext, res: ServerResponse, name: string): Promise<void> {
  const record = await schedulesOf(ctx.store).get(requireScheduleName(name));
  if (record === null) throw new ScheduleNotFoundError(name);
  sendJson(res, 200, toScheduleView(record, new Date()));
}

/**
 * The routes at fixed paths. `health` and `metrics` answer GET /health and GET /metrics (public
 * metrics when `publicMetrics`).
 */
export function fixedRoutes(
  ctx: AdminRouteContext,
  health: () => Promise<HealthReport>,
  metrics: () => Promise<MetricsSource>,
  publicMetrics: boolean,
): Map<string, Route> {
  return new Map<string, Route>(
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
        access: publicMetrics ? 'public' : 'protected',
        handle: async (_req, res) => {
          const source = await metrics();
          sendText(res, 200, source.contentType, await source.metrics());
        },
      },
      '/stats': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res) => sendJson(res, 200, await readStats(ctx.store)),
      },
      '/schedules': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res) =>
          sendJson(res, 200, { items: await readSchedules(ctx.store, new Date()) }),
      },
      '/types/paused': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res) => sendJson(res, 200, { items: await readPausedTypes(ctx.store) }),
      },
      '/commands': {
        method: 'GET',
        access: 'protected',
        handle: async (_req, res, url) => {
          const query = parseListQuery(url.searchParams);
          const page = await ctx.store.list(query);
          const next = new URLSearchParams(url.searchParams);
          if (page.nextCursor !== null) next.set('cursor', page.nextCursor);
          sendJson(res, 200, {
            items: page.items.map((c) => toStatusListItem(c, ctx.linkBase)),
            nextCursor: page.nextCursor,
            links: { next: page.nextCursor === null ? null : `${ctx.linkBase}/commands?${next.toString()}` },
          });
        },
      },
    } satisfies Record<string, Route>),
  );
}

/** The route of a path with a parameter (a command, a schedule, a type, a status reference). */
export function parameterRoute(ctx: AdminRouteContext, path: string): Route | undefined {
  const settings = ctx.publicStatus;
  const reference = /^\/status\/(workflows\/)?([^/]+)$/.exec(path);
  if (reference !== null && settings !== null) {
    const text = decodeSegment(reference[2] ?? '');
    const show = reference[1] === undefined ? showPublicStatus : showPublicWorkflowStatus;
    return { method: 'GET', access: 'public', handle: (_req, res) => show(ctx, res, text, settings) };
  }
  const schedule = /^\/schedules\/([^/]+)(?:\/(pause|resume|add|remove))?$/.exec(path);
  if (schedule !== null) {
    const name = decodeSegment(schedule[1] ?? '');
    const action = schedule[2];
    if (action === undefined) {
      return { method: 'GET', access: 'protected', handle: (_req, res) => showSchedule(ctx, res, name) };
    }
    const act =
      action === 'add'
        ? addScheduleNamed
        : action === 'remove'
          ? removeScheduleNamed
          : (c: AdminRouteContext, req: IncomingMessage, res: ServerResponse, n: string) =>
              scheduleAction(c, action === 'pause')(req, res, n);
    return { method: 'POST', access: 'protected', handle: (req, res) => act(ctx, req, res, name) };
  }
  const typed = /^\/types\/([^/]+)\/(pause|resume)$/.exec(path);
  if (typed !== null) {
    const segment = typed[1] ?? '';
    const act = typeAction(ctx, typed[2] === 'pause');
    return {
      method: 'POST',
      access: 'protected',
      // Decoded only once the caller is known: a stranger learns nothing from a 400.
      handle: (req, res) => act(req, res, decodeTextSegment('type', segment)),
    };
  }
  const limited = /^\/(rate-limits|key-limits|key-rate-limits)\/([^/]+)$/.exec(path);
  if (limited !== null) {
    const segment = limited[2] ?? '';
    const set =
      limited[1] === 'rate-limits'
        ? flowLimitRoute(ctx, 'rate limit', setRateLimit)
        : limited[1] === 'key-limits'
          ? flowLimitRoute(ctx, 'key limit', setKeyLimit)
          : flowLimitRoute(ctx, 'rate limit per key', setKeyRateLimit);
    return {
      method: 'POST',
      access: 'protected',
      handle: (req, res) => set(req, res, decodeTextSegment('type', segment)),
    };
  }
  const workflow = /^\/workflows\/([^/]+)(?:\/(cancel))?$/.exec(path);
  if (workflow !== null)
    return workflowRoute(ctx, decodeSegment(workflow[1] ?? ''), workflow[2] === 'cancel');
  const m = /^\/commands\/([^/]+)(?:\/([^/]+))?$/.exec(path);
  if (m === null) return undefined;
  const id = decodeSegment(m[1] ?? '');
  const action = m[2];
  if (action === undefined) {
    return { method: 'GET', access: 'protected', handle: (_req, res) => showStatus(ctx, res, id) };
  }
  if (!(ADMIN_TRANSITIONS as readonly string[]).includes(action)) return undefined;
  const act = transition(ctx, action as AdminTransition);
  return { method: 'POST', access: 'protected', handle: (req, res) => act(req, res, id) };
}

/** `GET /workflows/:id` (its status resource) and `POST /workflows/:id/cancel`. */
function workflowRoute(ctx: AdminRouteContext, id: string, cancel: boolean): Route {
  if (!cancel) {
    return {
      method: 'GET',
      access: 'protected',
      handle: async (_req, res) => {
        const view = await readWorkflow(ctx.store, id, ctx.linkBase);
        sendJson(res, 200, view, view.terminal ? {} : { 'Retry-After': ctx.retryAfter });
      },
    };
  }
  return {
    method: 'POST',
    access: 'protected',
    handle: async (req, res) => {
      const body = await readJsonBody(req);
      const extra = Object.keys(body).find((key) => key !== 'reason');
      if (extra !== undefined) {
        throw new InvalidArgumentError(
          `cancel takes only "reason", not ${JSON.stringify(extra.slice(0, 40))}`,
        );
      }
      const done = await cancelWorkflowView(ctx.store, id, parseReason(body['reason']), ctx.linkBase);
      ctx.logger.info({ workflowId: id, cancelled: done.cancelled.length }, 'admin workflow cancel');
      sendJson(res, 200, done);
    },
  };
}

/** An optional JSON object body, at most 16 KiB. */
export async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
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
