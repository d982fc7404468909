// A worker process for the rate-limit end-to-end test: runs a rate-limited type (IMMEDIATE, so the
// commands it submits itself are claimed by id after commit, with a token, and the others by its
// poll loop) and an IMMEDIATE type without a rate limit, on the store described in
// ASYNCCMD_E2E_WORKER (JSON), and appends every execution's start to the log file named there
// (worker-spec.mjs), with the time of its claim on the database clock (the command's startedAt):
// what the rate limit governs, whatever the pool's queue then adds before the executor runs.
// Runs built JS (npx tsc -b first).
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAsyncCommands } from '@asynccmd/runtime';
import { log, runUntilSigterm, spec, store } from './worker-spec.mjs';

const started = (type) => async (_payload, ctx) => {
  log(`start ${type} ${ctx.id} ${process.pid} ${ctx.command.startedAt.getTime()}`);
  await sleep(spec.workMs);
};

const runtime = createAsyncCommands({
  store,
  pollIntervalMs: spec.pollIntervalMs,
  sharedPool: { concurrency: spec.concurrency },
  rateLimits: { [spec.rated]: spec.rate },
  executors: [
    { type: spec.rated, mode: 'IMMEDIATE', execute: started(spec.rated) },
    // IMMEDIATE too: where the store claims with the commit (PostgreSQL), that claim is asked among
    // the types without a rate limit, and the rated command it passes over is claimed with a token.
    { type: spec.free, mode: 'IMMEDIATE', execute: started(spec.free) },
  ],
});
runUntilSigterm(runtime);
// Told to submit: its own commands of the rated type, one transaction each, claimed by id right
// after each commit when a token is left. A transaction the database rolled back is tried again.
process.stdin.once('data', () => {
  void (async () => {
    for (let i = 0; i < spec.submits; i++) {
      for (let attempt = 1; ; attempt++) {
        try {
          await runtime.client.transaction((tx, submit) => submit(spec.rated, { from: process.pid, i }));
          break;
        } catch (error) {
          if (attempt >= 20) throw error;
          await sleep(5 * attempt);
        }
      }
    }
    process.stdout.write('submitted\n');
  })();
});
