import { InvalidArgumentError } from '@asynccmd/core';
import type { IncomingMessage } from 'node:http';
import { isLoopbackHost } from './auth.js';
import { HttpError } from './http-response.js';

/**
 * What keeps a web page in someone's browser from driving the admin API: a page may send requests
 * to any address (a form post, a fetch without preflight, a DNS-rebinding name pointed at
 * 127.0.0.1), but it cannot choose its Origin, nor send `Content-Type: application/json` to
 * another origin without a preflight this API never answers.
 */
export interface RequestGuardOptions {
  /**
   * Host names (no port) served besides loopback ones, e.g. ['ops.internal']. Checked when the
   * API runs without a token, or whenever this is given.
   */
  readonly allowedHosts?: readonly string[];
  /** Origins besides the server's own whose pages may call the API, e.g. ['https://console.example']. */
  readonly allowedOrigins?: readonly string[];
}

export interface RequestGuard {
  /** Throws a 403 HttpError for a Host or Origin the API does not serve. */
  check(req: IncomingMessage): void;
}

/** `checkHost`: refuse Host names other than loopback and `allowedHosts`. */
export function createRequestGuard(options: RequestGuardOptions, checkHost: boolean): RequestGuard {
  const hosts = new Set(listOf('allowedHosts', options.allowedHosts).map(requireHostName));
  const origins = new Set(listOf('allowedOrigins', options.allowedOrigins).map(requireOrigin));
  const hostChecked = checkHost || options.allowedHosts !== undefined;
  return {
    check(req) {
      const host = req.headers.host;
      if (hostChecked) {
        const name = host === undefined ? null : hostNameOf(host);
        if (name === null || !(isLoopbackHost(name) || hosts.has(name))) {
          throw new HttpError(
            403,
            'HOST_NOT_ALLOWED',
            'this Host is not served; use a loopback address or one of allowedHosts',
          );
        }
      }
      const origin = req.headers.origin;
      // Browsers send Origin with every cross-origin request; without one it is not a page's.
      if (origin === undefined) return;
      const page = parseUrl(origin);
      if (page !== null && (origins.has(page.origin) || (host !== undefined && sameHost(page, host)))) return;
      throw new HttpError(
        403,
        'ORIGIN_NOT_ALLOWED',
        'requests from this Origin are refused; see allowedOrigins',
      );
    },
  };
}

function listOf(what: string, value: unknown): readonly unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new InvalidArgumentError(`${what} must be an array of strings`);
  return value;
}

function parseUrl(text: string): URL | null {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}

/** The host name of a Host header value ('LOCALHOST:80' → 'localhost'), or null when it is not one. */
function hostNameOf(host: string): string | null {
  const url = parseUrl(`http://${host}`);
  if (url === null || url.username !== '' || url.password !== '' || url.pathname !== '/') return null;
  if (url.search !== '' || url.hash !== '') return null;
  return url.hostname.toLowerCase();
}

/** The page's origin is this server's own: the host (and port) it was loaded from is the Host asked for. */
function sameHost(page: URL, host: string): boolean {
  return parseUrl(`${page.protocol}//${host}`)?.host === page.host;
}

function requireHostName(entry: unknown): string {
  const name = typeof entry === 'string' ? hostNameOf(entry) : null;
  if (name === null || name !== (entry as string).toLowerCase()) {
    throw new InvalidArgumentError(
      `allowedHosts entry ${JSON.stringify(entry)} must be a host name without a port, e.g. ops.internal`,
    );
  }
  return name;
}

function requireOrigin(entry: unknown): string {
  const url = typeof entry === 'string' ? parseUrl(entry) : null;
  if (url === null || url.origin !== (entry as string).replace(/\/$/, '')) {
    throw new InvalidArgumentError(
      `allowedOrigins entry ${JSON.stringify(entry)} must be an origin such as https://console.example`,
    );
  }
  return url.origin;
}
