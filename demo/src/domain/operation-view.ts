import { operationState, type CommandRecord, type OperationState } from '@asynccmd/core';
import { FACTS_AT_ACCEPTANCE, FOLLOW_UP_FACTS, followUpsId, type FactName } from './facts.js';
import type { Order } from './order.js';

/** The order operation as a client sees it (seed 2, §3: ACCEPTED → PROCESSING → a terminal state). */
export type OperationStateName =
  'accepted' | 'processing' | 'completed' | 'follow_up_failed' | 'rejected' | 'cancelled';

const TERMINAL: ReadonlySet<OperationStateName> = new Set([
  'completed',
  'follow_up_failed',
  'rejected',
  'cancelled',
]);

export type FactState = 'completed' | 'pending' | 'failed' | 'cancelled';

export interface CommandView {
  readonly fact: FactName;
  readonly id: string;
  readonly type: string;
  readonly status: CommandRecord['status'];
  readonly operation: OperationState;
  readonly failedAttempts: number;
  readonly maxRetry: number;
  /**
   * Whether the latest attempt failed. The error text itself stays behind the admin API: it can
   * carry what a downstream or driver said (hosts, credentials), and this view is public.
   */
  readonly lastAttemptFailed: boolean;
  readonly nextRunAt: string;
  readonly finishedAt: string | null;
  /** What its executor left (ctx.setResult) once it succeeded: the supplier's decision, say; else null. */
  readonly result: unknown;
  readonly links: { readonly status: string };
}

export interface OperationView {
  readonly operationId: string;
  readonly orderId: number;
  readonly state: OperationStateName;
  /** Polling may stop (a follow_up_failed operation may still be completed by an operator's retry). */
  readonly terminal: boolean;
  readonly completedFacts: FactName[];
  readonly pendingFacts: FactName[];
  readonly failedFacts: FactName[];
  readonly cancelledFacts: FactName[];
  readonly order: {
    readonly status: Order['status'];
    readonly version: number;
    readonly inventoryMode: Order['inventoryMode'];
    readonly boundary: Order['boundary'];
    readonly totalCents: number;
    readonly rejectReason: string | null;
  };
  readonly commands: CommandView[];
  readonly acceptedAt: string;
  readonly terminalAt: string | null;
  readonly links: {
    readonly self: string;
    readonly order: string;
    /** The admin status resource of the follow-ups' workflow, once the order is confirmed (split boundary). */
    readonly followUps: string | null;
  };
}

export interface ViewPaths {
  /** Where the admin API is mounted, e.g. '/admin'. */
  readonly adminBase: string;
}

export function operationUri(operationId: string): string {
  return `/operations/${encodeURIComponent(operationId)}`;
}

export function orderUri(orderId: number): string {
  return `/orders/${orderId}`;
}

function factOfCommand(c: CommandRecord | undefined): FactState {
  switch (c?.status) {
    case 'SUCCESS':
      return 'completed';
    case 'DEAD':
      return 'failed';
    case 'CANCELLED':
      return 'cancelled';
    default:
      return 'pending';
  }
}

/**
 * Derives the operation from the order row and the current rows of its commands. Pure, so the
 * HTTP answer, the load driver and the experiment read one definition of "terminal".
 */
export function buildOperationView(
  order: Order,
  links: readonly { fact: FactName; commandId: string }[],
  commands: readonly CommandRecord[],
  paths: ViewPaths,
): OperationView {
  const byId = new Map(commands.map((c) => [c.id, c]));
  const commandOf = new Map(links.map((l) => [l.fact, byId.get(l.commandId)]));
  const facts = new Map<FactName, FactState>();
  for (const f of FACTS_AT_ACCEPTANCE[order.inventoryMode]) facts.set(f, 'completed');

  if (order.boundary === 'inline') {
    // All-synchronous variant: the request did everything or stopped at the first failure.
    const failedAt = order.inlineFailure as FactName | null;
    let failed = false;
    for (const f of ['inventory.confirmed', ...FOLLOW_UP_FACTS] as FactName[]) {
      if (f === 'inventory.confirmed' && order.inventoryMode === 'local') continue;
      if (f === failedAt) failed = true;
      facts.set(f, failed ? 'failed' : 'completed');
    }
  } else {
    let blocked = order.status === 'REJECTED';
    if (order.inventoryMode === 'downstream') {
      const decided: FactState | null =
        order.status === 'CONFIRMED' ? 'completed' : order.status === 'REJECTED' ? 'failed' : null;
      const confirmation = decided ?? factOfCommand(commandOf.get('inventory.confirmed'));
      facts.set('inventory.confirmed', confirmation);
      // The follow-ups are owed only once the supplier said yes: a dead or cancelled confirmation
      // leaves nothing pending (an operator's retry of it brings them back).
      blocked ||= confirmation === 'failed' || confirmation === 'cancelled';
    }
    if (!blocked) {
      for (const f of FOLLOW_UP_FACTS)
        facts.set(f, order.status === 'CONFIRMED' ? factOfCommand(commandOf.get(f)) : 'pending');
    }
  }

  const named = (s: FactState) => [...facts].filter(([, v]) => v === s).map(([k]) => k);
  const pending = named('pending');
  const failed = named('failed');
  const cancelled = named('cancelled');
  const views = links.flatMap((l): CommandView[] => {
    const c = byId.get(l.commandId);
    return c ? [toCommandView(l.fact, c, paths)] : [];
  });

  // The supplier's answer is recorded in its command's transaction, with its SUCCESS and result:
  // a REJECTED order's view always carries the answer.
  let state: OperationStateName;
  if (order.status === 'REJECTED') state = 'rejected';
  else if (pending.length > 0) {
    const started =
      views.some((v) => v.operation !== 'accepted') ||
      facts.size - pending.length > FACTS_AT_ACCEPTANCE[order.inventoryMode].length;
    state = started ? 'processing' : 'accepted';
  } else if (failed.length > 0) state = 'follow_up_failed';
  else if (cancelled.length > 0) state = 'cancelled';
  else state = 'completed';
  const terminal = TERMINAL.has(state);

  const finishes = commands.map((c) => c.finishedAt?.getTime() ?? 0);
  const terminalAt = terminal ? Math.max(order.decidedAt ?? order.createdAt, ...finishes) : null;
  return {
    operationId: order.operationId,
    orderId: order.id,
    state,
    terminal,
    completedFacts: named('completed'),
    pendingFacts: pending,
    failedFacts: failed,
    cancelledFacts: cancelled,
    order: {
      status: order.status,
      version: order.version,
      inventoryMode: order.inventoryMode,
      boundary: order.boundary,
      totalCents: order.totalCents,
      rejectReason: order.rejectReason,
    },
    commands: views,
    acceptedAt: new Date(order.createdAt).toISOString(),
    terminalAt: terminalAt === null ? null : new Date(terminalAt).toISOString(),
    links: {
      self: operationUri(order.operationId),
      order: orderUri(order.id),
      followUps:
        order.boundary === 'commands' && order.status === 'CONFIRMED'
          ? `${paths.adminBase}/workflows/${encodeURIComponent(followUpsId(order))}`
          : null,
    },
  };
}

function toCommandView(fact: FactName, c: CommandRecord, paths: ViewPaths): CommandView {
  return {
    fact,
    id: c.id,
    type: c.type,
    status: c.status,
    operation: operationState(c),
    failedAttempts: c.retryCount,
    maxRetry: c.maxRetry,
    lastAttemptFailed: c.lastError !== null,
    nextRunAt: c.nextRunAt.toISOString(),
    finishedAt: c.finishedAt?.toISOString() ?? null,
    result: c.result,
    links: { status: `${paths.adminBase}/commands/${encodeURIComponent(c.id)}` },
  };
}
