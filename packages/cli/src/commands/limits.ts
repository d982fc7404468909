import type { Command } from 'commander';
import { LIMITS, type CommandStore } from '@asynccmd/core';
import {
  formatDuration,
  parseDuration,
  setKeyLimit,
  setKeyRateLimit,
  setRateLimit,
  type FlowLimitChange,
} from '@asynccmd/runtime/ops';
import { parseCount, parseWeights } from '../arguments.js';
import type { CliContext } from '../cli-context.js';

/** The options of the rate limits (a type's, or per key). */
interface RateOptions {
  maxStarts: string;
  per: string;
  burst?: string;
  json?: boolean;
}

/** `--max-starts`, `--per` and `--burst`, checked before the database is asked (the store checks the whole limit again). */
function rateChange(opts: RateOptions): FlowLimitChange {
  return {
    maxStarts: parseCount('--max-starts', opts.maxStarts, 1_000_000),
    periodMs: parseDuration(opts.per),
    ...(opts.burst === undefined ? {} : { burst: parseCount('--burst', opts.burst, 1_000_000) }),
  };
}

/**
 * `asynccmd rate-limit`, `key-limit` and `key-rate-limit`: change a type's flow limit for every
 * instance at once (their claims read the stored limit); an instance that starts later declares
 * its own options' limits again.
 */
export function registerLimits(program: Command, cli: CliContext): void {
  const { out, json, withStore } = cli;
  /** Runs `set` on the store, then prints what was stored (`say`) or its JSON. */
  const change =
    <R>(set: (store: CommandStore) => Promise<R>, say: (stored: R) => string, asJson?: boolean) =>
    (cmd: Command) =>
      withStore(cmd, async (store) => {
        const stored = await set(store);
        if (asJson) return json(stored);
        out(say(stored));
      });

  program
    .command('rate-limit')
    .description("change a type's rate limit for every instance (until one starts with its own)")
    .argument('<type>', 'command type')
    .requiredOption('--max-starts <n>', 'at most this many starts in any window of --per')
    .requiredOption('--per <duration>', 'the window, e.g. 1m, 10s, 1h')
    .option('--burst <n>', 'the most starts at once after a quiet spell (default a tenth)')
    .option('--json', 'machine-readable output')
    .action(async (type: string, opts: RateOptions, cmd: Command) => {
      const limit = rateChange(opts);
      await change(
        (store) => setRateLimit(store, type, limit),
        (s) =>
          `type ${JSON.stringify(s.type)}: at most ${s.maxStarts} starts per ${formatDuration(s.periodMs)} (burst ${s.burst}), ${s.tokens} token(s) now`,
        opts.json,
      )(cmd);
    });

  program
    .command('key-limit')
    .description(
      "change a type's limit of RUNNING commands per key, or its keys' weights, for every instance",
    )
    .argument('<type>', 'command type')
    .option('--max-running <n>', 'at most this many of one key RUNNING at once (default: the stored one)')
    .option('--key <field>', 'the payload field that is the key (default: the stored one)')
    .option(
      '--weight <key=w>',
      'a key that takes w commands per turn (repeat for more keys; replaces the stored weights)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option('--no-weights', 'drop the stored weights: every key takes one command per turn')
    .option('--json', 'machine-readable output')
    .action(
      async (
        type: string,
        opts: { maxRunning?: string; key?: string; weight?: string[]; weights?: boolean; json?: boolean },
        cmd: Command,
      ) => {
        const limit = {
          ...(opts.maxRunning === undefined
            ? {}
            : { maxRunning: parseCount('--max-running', opts.maxRunning, LIMITS.keyLimit) }),
          ...(opts.key === undefined ? {} : { key: opts.key }),
          ...(opts.weights === false
            ? { weights: {} }
            : opts.weight === undefined
              ? {}
              : { weights: parseWeights(opts.weight, LIMITS.keyWeight) }),
        };
        await change(
          (store) => setKeyLimit(store, type, limit),
          (s) =>
            `type ${JSON.stringify(s.type)}: at most ${s.maxRunning} running per ${s.keyField}` +
            (s.weights === undefined
              ? ''
              : `; weights ${Object.entries(s.weights)
                  .map(([k, w]) => `${JSON.stringify(k)}=${w}`)
                  .join(', ')}`),
          opts.json,
        )(cmd);
      },
    );

  program
    .command('key-rate-limit')
    .description("change a type's rate limit per key for every instance")
    .argument('<type>', 'command type')
    .requiredOption('--max-starts <n>', 'at most this many starts of one key in any window of --per')
    .requiredOption('--per <duration>', 'the window, e.g. 1s, 1m')
    .option('--burst <n>', 'the most starts of one key at once after a quiet spell (default a tenth)')
    .option('--key <field>', 'the payload field that is the key (default: the stored one)')
    .option('--json', 'machine-readable output')
    .action(async (type: string, opts: RateOptions & { key?: string }, cmd: Command) => {
      const limit = { ...rateChange(opts), ...(opts.key === undefined ? {} : { key: opts.key }) };
      await change(
        (store) => setKeyRateLimit(store, type, limit),
        (s) =>
          `type ${JSON.stringify(s.type)}: at most ${s.maxStarts} starts per ${formatDuration(s.periodMs)} per ${s.keyField} (burst ${s.burst})`,
        opts.json,
      )(cmd);
    });
}
