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
  /** Requests in flight at once (closed-loop clients); ignored when `ratePerSec` is given. */
  readonly concurrency: number;
  /**
   * Open loop instead: request i starts at i / ratePerSec s, whether or not earlier ones were
   * answered (arrivals do not wait for a slow service), and its time counts from that moment.
   */
  readonly ratePerSec?: number;
  readonly onAnswer?: (sent: SentRequest, done: number) => void;
}

/**
 * Sends every request through real HTTP with `concurrency` clients, each waiting for its answer,
 * or at a fixed rate (`ratePerSec`).
 */
export async function driveLoad(options: LoadOptions): Promise<SentRequest[]> {
  const results: SentRequest[] = [];
  const send = async (index: number, started: number): Promise<void> => {
    const r = options.requests[index] as GeneratedRequest;
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
  };
  const rate = options.ratePerSec;
  if (rate !== undefined) {
    const t0 = performance.now();
    const inFlight: Promise<void>[] = [];
    for (let i = 0; i < options.requests.length; i++) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      inFlight.push(send(i, due));
    }
    await Promise.all(inFlight);
  } else {
    let next = 0;
    const client = async (): Promise<void> => {
      while (next < options.requests.length) await send(next++, performance.now());
    };
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, client));
  }
  return results.sort((a, b) => a.index - b.index);
}
