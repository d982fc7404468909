/** A small fetch wrapper for the admin API tests. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
  readonly text: string;
}

export function client(baseUrl: string, token?: string) {
  const call = async (method: string, path: string, body?: unknown, auth = token): Promise<Answer> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(auth ? { Authorization: `Bearer ${auth}` } : {}),
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
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

/** Reads `.error.code` of an error answer. */
export function errorCode(a: Answer): string | undefined {
  return (a.body as { error?: { code?: string } } | null)?.error?.code;
}
