import type { IncomingMessage, ServerResponse } from 'node:http';

export const MAX_BODY_BYTES = 64 * 1024;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = JSON.stringify(body, null, 2);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

export function sendError(res: ServerResponse, e: HttpError): void {
  sendJson(res, e.status, {
    error: e.error,
    message: e.message,
    ...(e.details === undefined ? {} : { problems: e.details }),
  });
}

/** Reads a JSON body of at most MAX_BODY_BYTES; a clear 400/413/415 otherwise. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) {
    throw new HttpError(
      415,
      'unsupported_media_type',
      'send the order as JSON (Content-Type: application/json)',
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, 'payload_too_large', `the body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch (e) {
    throw new HttpError(400, 'invalid_json', `the body is not valid JSON: ${(e as Error).message}`);
  }
}
