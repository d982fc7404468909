import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium package, driven as is: no browser is downloaded. */
export const CHROMIUM_PATH = '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
];

export interface Browser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile of its own. */
export async function openBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'asynccmd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A page whose requests, dialogs and errors are recorded. */
export interface WatchedPage {
  readonly page: Page;
  readonly requests: string[];
  readonly dialogs: string[];
  /** Script errors, and what the browser refused (CSP, Trusted Types). */
  readonly problems: string[];
}

export async function watchedPage(context: BrowserContext): Promise<WatchedPage> {
  const page = await context.newPage();
  const watched: WatchedPage = { page, requests: [], dialogs: [], problems: [] };
  page.on('request', (r) => watched.requests.push(r.url()));
  page.on('dialog', (d) => {
    watched.dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss();
  });
  page.on('pageerror', (e) => watched.problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // Error answers (401 before the login, 404 for a missing id) are logged as failed loads; the
    // page shows them itself. What matters here is what the browser refused or what threw.
    if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) {
      watched.problems.push(`console: ${m.text()}`);
    }
  });
  return watched;
}
