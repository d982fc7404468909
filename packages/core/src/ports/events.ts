import type { ClaimedCommand, CommandId } from '../command.js';
import type { ExecutionMode } from '../dispatch.js';

/** What the runtime reports as commands move; metrics, logs and tracing subscribe to these. */
export type CommandEvent =
  | { readonly kind: 'submitted'; readonly id: CommandId; readonly type: string; readonly duplicate: boolean }
  | { readonly kind: 'claimed'; readonly command: ClaimedCommand; readonly via: 'poll' | 'immediate' }
  | {
      readonly kind: 'started';
      readonly command: ClaimedCommand;
      readonly mode: ExecutionMode;
      readonly runner: string;
    }
  | { readonly kind: 'succeeded'; readonly command: ClaimedCommand; readonly durationMs: number }
  | {
      readonly kind: 'retried';
      readonly command: ClaimedCommand;
      readonly durationMs: number;
      readonly error: string;
      readonly nextRunAt: Date;
    }
  | {
      readonly kind: 'dead';
      readonly command: ClaimedCommand;
      readonly durationMs: number;
      readonly error: string;
    }
  /** The outcome was not recorded because the claim had been taken away (reclaimed, requeued, killed). */
  | { readonly kind: 'fenced'; readonly command: ClaimedCommand; readonly outcome: 'succeeded' | 'failed' }
  | { readonly kind: 'reclaimed'; readonly id: CommandId; readonly type: string; readonly dead: boolean }
  | { readonly kind: 'released'; readonly id: CommandId; readonly type: string }
  | {
      readonly kind: 'round';
      readonly claimed: number;
      readonly reclaimed: number;
      readonly durationMs: number;
    }
  | { readonly kind: 'store-error'; readonly operation: string; readonly error: unknown };

export type CommandEventKind = CommandEvent['kind'];

/** A subscriber. It must not throw (errors are caught and logged) and must not block. */
export type CommandEventListener = (event: CommandEvent) => void;
