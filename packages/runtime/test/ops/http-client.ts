import { request } from 'node:http';

/** A small fetch wrapper for the admin API tests. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
  readonly text: string;
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Every POST says it is JSON, as the API asks of mutations, body or not. */
export function client(baseUrl: string, token?: string) {
  const call = async (method: string, path: string, body?: unknown, auth = token): Promise<Answer> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(auth ? { Authorization: `Bearer ${auth}` } : {}),
        ...(body !== undefined || method === 'POST' ? { 'Content-Type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: parsed(text), text };
  };
  return {
    get: (path: string, auth?: string) => call('GET', path, undefined, auth ?? token),
    post: (path: string, body?: unknown, auth?: string) => call('POST', path, body, auth ?? token),
    anonymous: {
      get: (path: string) => call('GET', path, undefined, ''),
      post: (path: string, body?: unknown) => call('POST', path, body, ''),
    },
    call,
  };
}

/**
 * One request with exactly these headers, as a browser page or a hand-written client sends it:
 * fetch would add or refuse some (Host, Origin), node:http sends what it is given.
 */
export function rawRequest(
  baseUrl: string,
  method: string,
  path: string,
  headers: Readonly<Record<string, string>> = {},
  body = '',
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}${path}`, { method, headers: { ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const answerHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (typeof value === 'string') answerHeaders.set(name, value);
        }
        resolve({ status: res.statusCode ?? 0, headers: answerHeaders, body: parsed(text), text });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Reads `.error.code` of an error answer. */
export function errorCode(a: Answer): string | undefined {
  return (a.body as { error?: { code?: string } } | null)?.error?.code;
}
