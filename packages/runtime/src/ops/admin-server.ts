import { InvalidArgumentError } from '@asynccmd/core';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminHandler, type AdminHandlerOptions } from './admin-handler.js';
import { isLoopbackHost } from './auth.js';

export interface AdminServerOptions extends AdminHandlerOptions {
  /** Default '127.0.0.1'. Any other address than loopback requires `token`. */
  readonly host?: string;
  /** Default 0: a free port (read it from the result). */
  readonly port?: number;
}

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
  const host = options.host ?? '127.0.0.1';
  if (options.token === undefined && !isLoopbackHost(host)) {
    throw new InvalidArgumentError(
      `refusing to serve the asynccmd admin API on ${JSON.stringify(host)} without a token: ` +
        'pass `token` (clients then send "Authorization: Bearer <token>") or listen on 127.0.0.1',
    );
  }
  const handler = createAdminHandler(options);
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}${(options.prefix ?? '').replace(/\/+$/, '')}`,
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
