import {
  COMMAND_STATUSES,
  type CommandRecord,
  type CommandStatus,
  LIMITS,
  type WorkflowMembership,
} from '@asynccmd/core';
import type { Command } from 'commander';
import {
  DEFAULT_LIST_LIMIT,
  formatDuration,
  formatProgress,
  MAX_LIST_LIMIT,
  parseBizKey,
  parseCursor,
  parseStatuses,
  parseType,
  readStats,
  requireCommandId,
  toStatusListItem,
  toStatusResource,
  type CommandStatusResource,
} from '@asynccmd/runtime/ops';
import { CliFailure, EXIT_FAILED } from '../failures.js';
import { parseCount } from '../arguments.js';
import { clip, renderTable } from '../table.js';
import type { CliContext } from '../cli-context.js';
import { pausedTable } from './pauses.js';

/** `asynccmd stats`, `list` and `show`: what the table holds. */
export function registerInspect(program: Command, cli: CliContext): void {
  const { out, json, withStore } = cli;
  program
    .command('stats')
    .description('counts by status and type, and the age of the oldest due pending command')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) =>
      withStore(cmd, async (store) => {
        const stats = await readStats(store);
        if (opts.json) return json(stats);
        const row = (label: string, counts: Readonly<Record<CommandStatus, number>>) => [
          label,
          ...COMMAND_STATUSES.map((s) => String(counts[s])),
        ];
        const types = Object.entries(stats.byType).sort(([a], [b]) => a.localeCompare(b));
        out(
          renderTable(
            ['TYPE', ...COMMAND_STATUSES],
            [...types.map(([type, counts]) => row(type, counts)), row('(all)', stats.byStatus)],
          ),
        );
        out(
          stats.oldestDueAt === null
            ? 'oldest due pending: none waiting'
            : `oldest due pending: waiting ${formatDuration(stats.oldestPendingAgeMs ?? 0)} (due ${stats.oldestDueAt})`,
        );
        // The stored limits every instance's claims enforce, beside what runs of each type now.
        if (stats.typeLimits.length > 0) {
          out('');
          out(
            renderTable(
              ['LIMITED TYPE', 'MAX RUNNING', 'RUNNING'],
              stats.typeLimits.map((l) => [
                l.type,
                String(l.maxRunning),
                String(stats.byType[l.type]?.RUNNING ?? 0),
              ]),
            ),
          );
        }
        if (stats.rateLimits.length > 0) {
          out('');
          out(
            renderTable(
              ['RATE LIMITED TYPE', 'MAX STARTS', 'PER', 'BURST', 'TOKENS NOW', 'PENDING'],
              stats.rateLimits.map((l) => [
                l.type,
                String(l.maxStarts),
                formatDuration(l.periodMs),
                String(l.burst),
                String(l.tokens),
                String(stats.byType[l.type]?.PENDING ?? 0),
              ]),
            ),
          );
        }
        const perKey = [
          ...stats.keyLimits.map((l) => [
            l.type,
            l.keyField,
            // A fair-share type is kept as a key limit never reached.
            l.maxRunning >= LIMITS.keyLimit ? 'fair share (turns, no limit)' : `${l.maxRunning} running`,
          ]),
          ...stats.keyRateLimits.map((l) => [
            l.type,
            l.keyField,
            `${l.maxStarts} starts per ${formatDuration(l.periodMs)} (burst ${l.burst})`,
          ]),
        ];
        if (perKey.length > 0) {
          out('');
          out(renderTable(['TYPE LIMITED PER KEY', 'KEY FIELD', 'AT MOST, PER KEY'], perKey));
        }
        // The keys whose commands are due, and the busiest of them (running / due, due counted to 1,000).
        const waiting = stats.keysWaiting.filter((w) => w.keys > 0);
        if (waiting.length > 0) {
          out('');
          out(
            renderTable(
              ['TYPE', 'KEYS WAITING', 'AT THEIR LIMIT', 'MOST RUNNING (RUNNING / DUE)'],
              waiting.map((w) => [
                w.type,
                String(w.keys),
                String(w.atLimit),
                w.top
                  .slice(0, 3)
                  .map((k) => `${k.key === '' ? '(no key)' : k.key.slice(0, 40)} ${k.running}/${k.due}`)
                  .join(', '),
              ]),
            ),
          );
        }
        if (stats.pausedTypes.length > 0) {
          out('');
          out(pausedTable(stats.pausedTypes, stats.byType));
        }
      }),
    );

  program
    .command('list')
    .description('list commands, newest first')
    .option('--status <statuses>', 'PENDING, RUNNING, SUCCESS, DEAD or CANCELLED (comma-separated)')
    .option('--type <type>', 'only this command type')
    .option('--biz-key <key>', 'only this business key')
    .option('--limit <n>', `at most this many (1-1000, default ${DEFAULT_LIST_LIMIT})`)
    .option('--cursor <cursor>', 'continue after a previous page')
    .option('--json', 'machine-readable output')
    .action(
      async (
        opts: {
          status?: string;
          type?: string;
          bizKey?: string;
          limit?: string;
          cursor?: string;
          json?: boolean;
        },
        cmd: Command,
      ) => {
        const query = {
          ...(opts.status !== undefined ? { status: parseStatuses(opts.status) } : {}),
          ...(opts.type !== undefined ? { type: parseType(opts.type) } : {}),
          ...(opts.bizKey !== undefined ? { bizKey: parseBizKey(opts.bizKey) } : {}),
          ...(opts.cursor !== undefined ? { cursor: parseCursor(opts.cursor) } : {}),
          limit:
            opts.limit !== undefined ? parseCount('--limit', opts.limit, MAX_LIST_LIMIT) : DEFAULT_LIST_LIMIT,
        };
        await withStore(cmd, async (store) => {
          const page = await store.list(query);
          if (opts.json) {
            // As GET /commands: the items leave the results out (`show` has them).
            return json({ items: page.items.map((c) => toStatusListItem(c)), nextCursor: page.nextCursor });
          }
          if (page.items.length === 0) return out('no commands match');
          out(
            renderTable(
              ['ID', 'STATUS', 'TYPE', 'BIZ KEY', 'PRIORITY', 'FAILED', 'NEXT RUN AT', 'LAST ERROR'],
              page.items.map((c) => [
                c.id,
                c.status,
                c.type,
                c.bizKey ?? '',
                String(c.priority),
                `${c.retryCount}/${c.maxRetry + 1}`,
                c.nextRunAt.toISOString(),
                clip(c.lastError, 60),
              ]),
            ),
          );
          if (page.nextCursor !== null) out(`more: --cursor ${page.nextCursor}`);
        });
      },
    );

  program
    .command('show')
    .description('everything about one command, payload and result included')
    .argument('<id>', 'command id')
    .option('--json', 'machine-readable output')
    .action(async (idText: string, opts: { json?: boolean }, cmd: Command) => {
      const id = requireCommandId(idText);
      await withStore(cmd, async (store) => {
        const c = await store.get(id);
        if (c === null) throw new CliFailure(`command ${id} does not exist`, EXIT_FAILED);
        const workflow = (await store.dependencies?.workflowOf(id)) ?? null;
        const detail = {
          ...toStatusResource(c),
          payload: c.payload,
          headers: c.headers,
          leaseUntil: c.leaseUntil,
          workflow,
        };
        if (opts.json) return json(detail);
        out(describeCommand(c, workflow));
      });
    });
}

function describeCommand(c: CommandRecord, workflow: WorkflowMembership | null): string {
  const view = toStatusResource(c);
  const iso = (d: Date | null) => d?.toISOString() ?? '-';
  const lines: [string, string][] = [
    ['id', c.id],
    ['type', c.type],
    ['bizKey', c.bizKey ?? '-'],
    ['status', `${c.status} (${view.operation})`],
    ['progress', formatProgress(c.progress)],
    ['workflow', workflow === null ? '-' : `${workflow.workflowId} (step ${workflow.step})`],
    [
      'attempts',
      `${c.retryCount} failed, reclaimed after a lost lease ${c.rescueCount} time${c.rescueCount === 1 ? '' : 's'}; ` +
        `${view.attempts.retriesLeft} of ${c.maxRetry} retries left`,
    ],
    ['nextRunAt', iso(c.nextRunAt)],
    ['priority', String(c.priority)],
    ['orderingKey', c.orderingKey ?? '-'],
    ['lastError', c.lastError ?? '-'],
    ['owner', c.owner ?? '-'],
    ['createdAt', iso(c.createdAt)],
    ['updatedAt', iso(c.updatedAt)],
    ['startedAt', iso(c.startedAt)],
    ['finishedAt', iso(c.finishedAt)],
    ['leaseUntil', iso(c.leaseUntil)],
    ['headers', JSON.stringify(c.headers)],
    ['history', describeHistory(view.history)],
    // Pretty-printed as the payload; null until SUCCESS and when the executor left none.
    ['result', view.result === null ? '-' : JSON.stringify(view.result, null, 2)],
    ['payload', JSON.stringify(c.payload, null, 2)],
  ];
  return lines.map(([k, v]) => `${k.padEnd(11)} ${v}`).join('\n');
}

/** One attempt a line, oldest first, under the first line's label. */
function describeHistory(history: CommandStatusResource['history']): string {
  if (history.length === 0) return '-';
  return history
    .map((a, i) => {
      const line = `${i + 1}. ${a.outcome}, on ${a.instance ?? '-'}, ${a.startedAt ?? '-'} → ${a.finishedAt}`;
      return a.error === null ? line : `${line}: ${a.error}`;
    })
    .join(`\n${' '.repeat(12)}`);
}
