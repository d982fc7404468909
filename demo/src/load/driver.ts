import type { GeneratedRequest } from './request-mix.js';
import { httpJson } from './http-client.js';

export interface SentRequest {
  readonly index: number;
  readonly intent: GeneratedRequest['intent'];
  /** HTTP status, or 0 when no answer came (connection error). */
  readonly status: number;
  readonly latencyMs: number;
  readonly operationId: string | null;
  readonly orderId: number | null;
  readonly error: string | null;
}

export interface LoadOptions {
  readonly baseUrl: string;
  readonly requests: readonly GeneratedRequest[];
  /** Requests in flight at once (closed-loop clients). */
  readonly concurrency: number;
  readonly onAnswer?: (sent: SentRequest, done: number) => void;
}

/** Sends every request through real HTTP with `concurrency` clients, each waiting for its answer. */
export async function driveLoad(options: LoadOptions): Promise<SentRequest[]> {
  const results: SentRequest[] = [];
  let next = 0;
  const client = async (): Promise<void> => {
    while (next < options.requests.length) {
      const index = next++;
      const r = options.requests[index] as GeneratedRequest;
      const started = performance.now();
      let sent: SentRequest;
      try {
        const answer = await httpJson(`${options.baseUrl}/orders`, 'POST', r.body, {
          'idempotency-key': r.idempotencyKey,
        });
        const body = (answer.body ?? {}) as { operationId?: string; orderId?: number; message?: string };
        sent = {
          index,
          intent: r.intent,
          status: answer.status,
          latencyMs: performance.now() - started,
          operationId: answer.status === 201 || answer.status === 202 ? (body.operationId ?? null) : null,
          orderId: body.orderId ?? null,
          error: answer.status >= 400 ? (body.message ?? `HTTP ${answer.status}`) : null,
        };
      } catch (e) {
        sent = {
          index,
          intent: r.intent,
          status: 0,
          latencyMs: performance.now() - started,
          operationId: null,
          orderId: null,
          error: (e as Error).message,
        };
      }
      results.push(sent);
      options.onAnswer?.(sent, results.length);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, client));
  return results.sort((a, b) => a.index - b.index);
}
