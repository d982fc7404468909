import { InvalidArgumentError, requireInt } from '@asynccmd/core';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminHandler, type AdminHandlerOptions } from './admin-handler.js';
import { isLoopbackHost, resolveAdminAuth } from './auth.js';
import { parseMountPath } from './validation.js';

export type AdminServerOptions = AdminHandlerOptions & {
  /** Default '127.0.0.1'. Any other address than loopback requires `token`. */
  readonly host?: string;
  /** Default 0: a free port (read it from the result). */
  readonly port?: number;
  /**
   * How long a client may take to send a whole request, headers and body, in ms; then it gets a
   * 408 and the connection is closed. Default ADMIN_REQUEST_TIMEOUT_MS (10 s): admin requests are
   * a few hundred bytes, so a slow one holds a connection for no good reason. Its headers must be
   * in within the same time (at most ADMIN_HEADERS_TIMEOUT_MS).
   */
  readonly requestTimeoutMs?: number;
};

/** Default of `requestTimeoutMs`. Node's own is 300 s, for uploads an admin API never takes. */
export const ADMIN_REQUEST_TIMEOUT_MS = 10_000;
/** The longest the request headers may take (Node's own is 60 s). */
export const ADMIN_HEADERS_TIMEOUT_MS = 5_000;
/** An idle kept-alive connection is closed after this (Node's default). */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** How often Node looks for requests past their time: its default, 30 s, would let one run that long over. */
const TIMEOUT_CHECK_INTERVAL_MS = 250;

export interface AdminServer {
  /** e.g. 'http://127.0.0.1:41234' (plus the prefix, when there is one). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly server: Server;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

/**
 * Serves the admin routes on their own port. Refuses to listen beyond this machine without a
 * token: an open admin API on the network lets anyone kill or replay commands.
 */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const host: unknown = options.host === undefined ? '127.0.0.1' : options.host;
  if (typeof host !== 'string' || host.trim() === '') {
    throw new InvalidArgumentError('host must be an address or host name such as 127.0.0.1');
  }
  const port: unknown = options.port === undefined ? 0 : options.port;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new InvalidArgumentError(
      `port must be a whole number from 0 to 65535, not ${JSON.stringify(port)}`,
    );
  }
  const token = resolveAdminAuth(options);
  if (token === null && !isLoopbackHost(host)) {
    throw new InvalidArgumentError(
      `refusing to serve the asynccmd admin API on ${JSON.stringify(host)} without a token: ` +
        'pass `token` (clients then send "Authorization: Bearer <token>") or listen on 127.0.0.1',
    );
  }
  const requestTimeoutMs = requireInt(
    'requestTimeoutMs',
    options.requestTimeoutMs ?? ADMIN_REQUEST_TIMEOUT_MS,
    100,
    300_000,
  );
  const handler = createAdminHandler(options);
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(ADMIN_HEADERS_TIMEOUT_MS, requestTimeoutMs),
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      connectionsCheckingInterval: Math.min(TIMEOUT_CHECK_INTERVAL_MS, requestTimeoutMs),
    },
    (req, res) => void handler(req, res),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${shownHost}:${address.port}${parseMountPath('prefix', options.prefix ?? '')}`;
  if (token === null) {
    options.logger?.warn(
      { url, auth: 'none' },
      `asynccmd admin API listening on ${url}, unauthenticated (auth: 'none'): every route is open to ` +
        'whoever reaches it from this machine',
    );
  } else {
    options.logger?.info(
      { url, auth: 'token' },
      `asynccmd admin API listening on ${url}; a bearer token is required except for /health` +
        `${options.publicStatus ? ', /status/<reference>, /status/workflows/<reference>' : ''}${options.publicMetrics ? ', /metrics' : ''}`,
    );
  }
  return {
    url,
    host: address.address,
    port: address.port,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
