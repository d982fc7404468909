// What the end-to-end worker processes share: their spec (ASYNCCMD_E2E_WORKER, JSON), the store it
// names, the append-only execution log (O_APPEND: lines of all processes interleave whole, in the
// order they happened), and a graceful stop on SIGTERM.
import { appendFileSync } from 'node:fs';
import process from 'node:process';

export const spec = JSON.parse(process.env.ASYNCCMD_E2E_WORKER ?? '{}');
const { [spec.store.factory]: openStore } = await import(spec.store.module);
export const store = openStore(spec.store.options);
export const log = (line) => appendFileSync(spec.log, `${line}\n`);

/** Starts `runtime`, stops it (and the store) on SIGTERM, and says `ready` on stdout. */
export function runUntilSigterm(runtime) {
  process.once('SIGTERM', () => {
    void runtime
      .stop({ timeoutMs: 5_000 })
      .then(() => store.close())
      .then(() => process.exit(0));
  });
  runtime.start();
  process.stdout.write('ready\n');
}
