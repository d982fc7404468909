import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { describeTarget, dropTarget, openFailure } from './db/database.js';
import { ConfigError, helpText, parseConfig, type DemoConfig } from './config.js';
import { scaleProfiles, START_PROFILES } from './downstream.js';
import { httpJson } from './load/http-client.js';
import { runLoad } from './load/run-load.js';
import { ProgressBar } from './load/progress.js';
import { ADMIN_BASE, PortTakenError, startDemoService, type DemoService } from './service.js';
import { formatSummary, summarise } from './summary.js';

/** Printed once the server listens; the experiment's parent process waits for this line. */
export const READY_PREFIX = 'order demo listening on ';

async function main(): Promise<number> {
  let config: DemoConfig | 'help';
  try {
    config = parseConfig(process.argv.slice(2));
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (config === 'help') {
    process.stdout.write(`${helpText()}\n`);
    return 0;
  }
  const { freshDb, database } = config;
  // A fresh SQLite file sits alone in its temp directory; a generated schema is dropped.
  const removeFresh = async () => {
    if (!freshDb) return;
    if (database.dialect === 'sqlite') rmSync(dirname(database.file), { recursive: true, force: true });
    else await dropTarget(database);
  };
  let service: DemoService;
  try {
    service = await startDemoService({
      database,
      port: config.port,
      movePortIfTaken: config.movePortIfTaken,
      profiles: scaleProfiles(START_PROFILES, config.latencyScale, config.failureScale),
      seed: config.seed,
    });
  } catch (e) {
    // Best effort: an unreachable server cannot drop what it never created either.
    await removeFresh().catch(() => undefined);
    const failure = openFailure(e, database);
    if (failure !== null) {
      process.stderr.write(`${failure}\n`);
      return 1;
    }
    if (!(e instanceof PortTakenError)) throw e;
    process.stderr.write(`${e.message}: choose another with --port N (0: any free port)\n`);
    return 1;
  }
  const cleanup = async () => {
    await service.close();
    await removeFresh();
  };
  // From here on, Ctrl-C stops gracefully, also in the middle of the load.
  const stopped = stopOnSignals(cleanup);
  if (config.exitWithParent) {
    process.stdin.resume();
    process.stdin.once('close', () => process.kill(process.pid, 'SIGTERM'));
  }
  const out = process.stdout;
  out.write(`asynccmd order demo — orders and commands in ${describeTarget(database)}\n`);
  if (service.portFallback) out.write(`port ${config.port} was taken; using ${service.port} instead\n`);
  out.write(`${READY_PREFIX}${service.url}\n`);

  if (config.load && config.orders > 0) {
    out.write(
      `\nBuilt-in load: ${config.orders} orders through POST /orders with ${config.concurrency} concurrent clients\n`,
    );
    const run = await runLoad({
      baseUrl: service.url,
      read: (ids) => service.boundary.operations(ids),
      orders: config.orders,
      concurrency: config.concurrency,
      seed: config.seed,
      runId: `load-${Date.now().toString(36)}`,
      progress: new ProgressBar(process.stderr),
    });
    out.write(`\nSummary\n${formatSummary(summarise(run))}\n`);
    out.write(await healthLine(service));
    const sample = run.sent.find((s) => s.operationId !== null);
    if (config.exitAfterLoad) {
      await cleanup();
      return 0;
    }
    printUrls(service, sample?.operationId ?? null);
  } else if (config.exitAfterLoad) {
    await cleanup();
    return 0;
  } else {
    printUrls(service, null);
  }
  await stopped;
  return 0;
}

/** What /health says after the load, and the retry call for a dead letter if there is one. */
async function healthLine(service: DemoService): Promise<string> {
  const health = (await httpJson(`${service.url}/health`, 'GET')).body as {
    status: string;
    reasons: { message: string }[];
  };
  const dead = await service.store.list({ status: 'DEAD', limit: 1 });
  const first = dead.items[0];
  return (
    `  health            ${health.status}${health.reasons.length ? ` — ${health.reasons.map((r) => r.message).join('; ')}` : ''}\n` +
    (first
      ? `                    see them in ${service.url}${ADMIN_BASE}/dashboard, or retry one: curl -s -X POST -H 'content-type: application/json' ${service.url}${ADMIN_BASE}/commands/${first.id}/retry\n`
      : '')
  );
}

function printUrls(service: DemoService, operationId: string | null): void {
  const u = service.url;
  const body = '{"customerId":"me","email":"me@example.test","items":[{"sku":"mug","quantity":1}]}';
  process.stdout.write(
    [
      '',
      `Serving on ${u}  (Ctrl-C stops gracefully)`,
      `  place an order   curl -si -X POST ${u}/orders -H 'content-type: application/json' -H 'idempotency-key: my-first-order' -d '${body}'`,
      `  made to order    same with "items":[{"sku":"custom-print","quantity":1}]  → 202 Accepted, follow the Location`,
      `  an operation     ${u}/operations/${operationId ?? '<operationId>'}`,
      `  dashboard        ${u}${ADMIN_BASE}/dashboard   (no login: this demo's admin API is unauthenticated, for this machine only; with a token the page asks for it)`,
      `  dead letters     ${u}${ADMIN_BASE}/commands?status=DEAD   (retry: POST ${u}${ADMIN_BASE}/commands/<id>/retry, Content-Type: application/json)`,
      `  stats            ${u}${ADMIN_BASE}/stats`,
      `  health, metrics  ${u}/health   ${u}/metrics`,
      '',
    ].join('\n'),
  );
}

/**
 * First SIGINT/SIGTERM: stop taking requests, let running commands finish (the runtime's graceful
 * stop), close the database (dropping a generated schema), exit 0. A second signal exits at once. Resolves after the graceful stop.
 */
function stopOnSignals(cleanup: () => Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`\n${signal} again: exiting without waiting\n`);
        process.exit(1);
      }
      stopping = true;
      process.stderr.write(
        `\n${signal}: shutting down gracefully (running commands finish; a second Ctrl-C forces)\n`,
      );
      cleanup().then(
        () => {
          process.stderr.write('stopped.\n');
          resolve();
          process.exit(0);
        },
        (e: unknown) => {
          process.stderr.write(`shutdown failed: ${String(e)}\n`);
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`order demo failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
