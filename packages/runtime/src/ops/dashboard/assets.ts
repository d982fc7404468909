import { InvalidArgumentError } from '@asynccmd/core';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The page's files, written by hand and shipped as they are in the package's `assets/dashboard`
 * folder (beside `src` and `dist`, so both the sources and the build find it): nothing to build,
 * nothing fetched from elsewhere.
 */
const ASSET_DIR = new URL('../../../assets/dashboard/', import.meta.url);

/**
 * What every dashboard answer carries. The script and the styles are files of this origin, and no
 * HTML can be made from a string (Trusted Types with no policy): a value from the table can only
 * ever become text.
 */
export const DASHBOARD_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join('; '),
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

export interface StaticAsset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

/** The script's modules: app.js, the page's entry, imports the others by their paths beside it. */
export const DASHBOARD_MODULES = [
  'app.js',
  'state.js',
  'dom.js',
  'api.js',
  'overview.js',
  'outcomes.js',
  'commands.js',
  'detail.js',
  'workflow.js',
  'actions.js',
] as const;

const FILES: Readonly<Record<string, readonly [file: string, contentType: string]>> = {
  '': ['index.html', 'text/html; charset=utf-8'],
  ...Object.fromEntries(
    DASHBOARD_MODULES.map((file) => [`/${file}`, [file, 'text/javascript; charset=utf-8'] as const]),
  ),
  '/app.css': ['app.css', 'text/css; charset=utf-8'],
  '/icon.svg': ['icon.svg', 'image/svg+xml'],
};

/**
 * The page's files by their path under `/dashboard`, read once. The HTML names where the admin
 * routes are (`base`, a path of plain segments) for the script to find them.
 */
export function loadDashboardAssets(base: string): ReadonlyMap<string, StaticAsset> {
  const assets = new Map<string, StaticAsset>();
  for (const [path, [file, contentType]] of Object.entries(FILES)) {
    let text: string;
    try {
      text = readFileSync(new URL(file, ASSET_DIR), 'utf8');
    } catch {
      throw new InvalidArgumentError(
        `the dashboard's file ${file} is missing from ${ASSET_DIR.pathname}: is the package installed whole?`,
      );
    }
    const body = Buffer.from(
      file === 'index.html' ? text.replaceAll('__BASE__', escapeAttribute(base)) : text,
    );
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(path, { body, contentType, etag });
  }
  return assets;
}

/** Sends a file, or 304 when the browser has this version already (it revalidates every time). */
export function sendAsset(req: IncomingMessage, res: ServerResponse, asset: StaticAsset): void {
  const headers = { ...DASHBOARD_SECURITY_HEADERS, ETag: asset.etag, 'Cache-Control': 'no-cache' };
  if (req.headers['if-none-match'] === asset.etag) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  res.writeHead(200, {
    ...headers,
    'Content-Type': asset.contentType,
    'Content-Length': asset.body.length,
  });
  res.end(asset.body);
}

function escapeAttribute(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
