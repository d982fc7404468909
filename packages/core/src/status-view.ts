import type { CommandRecord } from './command.js';

/**
 * The command as an API client sees it behind a 202 Accepted: accepted but not yet
 * started, processing (running or waiting for a retry), completed, follow-up failed (a dead letter
 * a person must look at), or cancelled.
 */
export type OperationState = 'accepted' | 'processing' | 'completed' | 'follow_up_failed' | 'cancelled';

export function operationState(
  c: Pick<CommandRecord, 'status' | 'retryCount' | 'rescueCount'>,
): OperationState {
  switch (c.status) {
    // Accepted and held until the commands it depends on have finished.
    case 'WAITING':
      return 'accepted';
    case 'PENDING':
      return c.retryCount === 0 && c.rescueCount === 0 ? 'accepted' : 'processing';
    case 'RUNNING':
      return 'processing';
    case 'SUCCESS':
      return 'completed';
    case 'DEAD':
      return 'follow_up_failed';
    case 'CANCELLED':
      return 'cancelled';
  }
}

/** Terminal from the client's point of view: polling may stop (a DEAD one may still be retried by a person). */
export function isTerminalOperationState(s: OperationState): boolean {
  return s === 'completed' || s === 'follow_up_failed' || s === 'cancelled';
}
