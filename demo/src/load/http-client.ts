import { request as httpRequest } from 'node:http';

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: unknown;
}

/**
 * One JSON request over a fresh loopback connection (what a client across the network does). A
 * POST always says it is JSON, body or not: the admin API takes mutations only so.
 */
export function httpJson(
  url: string,
  method: 'GET' | 'POST',
  body?: unknown,
  headers: Readonly<Record<string, string>> = {},
  timeoutMs = 30_000,
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(
      url,
      {
        method,
        headers: {
          ...(text === undefined && method === 'GET' ? {} : { 'content-type': 'application/json' }),
          ...(text === undefined ? {} : { 'content-length': Buffer.byteLength(text) }),
          ...headers,
        },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = raw;
          try {
            parsed = raw === '' ? null : JSON.parse(raw);
          } catch {
            // not JSON (e.g. /metrics): keep the text
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(text);
  });
}
