import { isAsyncCommandError, type AsyncCommandErrorCode } from '@asynccmd/core';
import type { ServerResponse } from 'node:http';

/** Codes the HTTP layer adds to the core's: conditions of the request, not of a command. */
export type HttpErrorCode =
  | 'UNAUTHORIZED'
  | 'HOST_NOT_ALLOWED'
  | 'ORIGIN_NOT_ALLOWED'
  | 'ROUTE_NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'BODY_TOO_LARGE'
  | 'METRICS_UNAVAILABLE'
  | 'INTERNAL';

/** Every error answer has this shape. */
export interface ErrorBody {
  readonly error: { readonly code: AsyncCommandErrorCode | HttpErrorCode; readonly message: string };
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: HttpErrorCode | AsyncCommandErrorCode,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

const STATUS_BY_CODE: Readonly<Record<AsyncCommandErrorCode, number>> = {
  INVALID_ID: 400,
  INVALID_ARGUMENT: 400,
  INVALID_IDENTIFIER: 400,
  UNKNOWN_COMMAND_TYPE: 400,
  PAYLOAD_NOT_SERIALISABLE: 400,
  PAYLOAD_TOO_LARGE: 400,
  // Raised inside an executor (ctx.setResult), never by the admin API.
  RESULT_NOT_SERIALISABLE: 400,
  RESULT_TOO_LARGE: 400,
  NOT_FOUND: 404,
  ILLEGAL_TRANSITION: 409,
  IDEMPOTENCY_CONFLICT: 409,
  SCHEDULE_EXISTS: 409,
  SCHEDULE_DECLARED_IN_CODE: 409,
  STALE_CLAIM: 409,
  // Other writers kept changing the command meanwhile; the same request may succeed now.
  STORE_CONTENTION: 409,
  // Not raised by the admin API; a transaction of the caller's that did not commit.
  TRANSACTION_ROLLED_BACK: 409,
  // Raised inside a transactional executor, never by the admin API.
  TRANSACTION_CLOSED: 409,
};

/** The answer for a thrown value; `internal` is true when it was not one of ours (log it). */
export function describeHttpError(e: unknown): {
  status: number;
  body: ErrorBody;
  headers: Readonly<Record<string, string>>;
  internal: boolean;
} {
  if (e instanceof HttpError) {
    return {
      status: e.status,
      body: { error: { code: e.code, message: e.message } },
      headers: e.headers,
      internal: false,
    };
  }
  if (isAsyncCommandError(e)) {
    return {
      status: STATUS_BY_CODE[e.code] ?? 400,
      body: { error: { code: e.code, message: e.message } },
      headers: {},
      internal: false,
    };
  }
  // Driver messages can name hosts, users and SQL: they go to the log, not to the caller.
  return {
    status: 500,
    body: { error: { code: 'INTERNAL', message: 'internal error (see the server log)' } },
    headers: {},
    internal: true,
  };
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(text);
}

export function sendText(res: ServerResponse, status: number, contentType: string, text: string): void {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
  });
  res.end(text);
}
