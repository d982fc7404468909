import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminServer } from '../../src/index.js';
import { ADMIN_HEADERS_TIMEOUT_MS, ADMIN_REQUEST_TIMEOUT_MS } from '../../src/ops/admin-server.js';
import type { AdminServer } from '../../src/ops/admin-server.js';
import { openSqlite } from './databases.js';
import type { OpsDatabase } from './admin-http.suite.js';
import { TOKEN } from './admin-http.suite.js';

/**
 * A client that sends its request slowly (a slow-loris, or one that hung mid-body) is cut off
 * within the admin API's own bounds, not Node's 300 s: seen on a raw socket, as such a client is.
 */

/** Opens a raw connection, writes `text`, and resolves with what came back and how long until the server closed it. */
function sendAndWait(
  server: AdminServer,
  text: string,
  giveUpMs: number,
): Promise<{ reply: string; closedAfterMs: number | null }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(server.port, '127.0.0.1', () => socket.write(text));
    let reply = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (reply += chunk));
    const giveUp = setTimeout(() => {
      socket.destroy();
      resolve({ reply, closedAfterMs: null });
    }, giveUpMs);
    socket.on('close', () => {
      clearTimeout(giveUp);
      resolve({ reply, closedAfterMs: performance.now() - started });
    });
    socket.on('error', () => undefined);
  });
}

describe('admin server timeouts', () => {
  let db: OpsDatabase;
  beforeAll(async () => {
    db = await openSqlite();
  });
  afterAll(async () => {
    await db.dispose();
  });

  it('sets request and header timeouts suited to an admin API by default', async () => {
    const server = await startAdminServer({ store: db.store, token: TOKEN });
    try {
      expect(server.server.requestTimeout).toBe(ADMIN_REQUEST_TIMEOUT_MS);
      expect(server.server.headersTimeout).toBe(ADMIN_HEADERS_TIMEOUT_MS);
      expect(ADMIN_REQUEST_TIMEOUT_MS).toBeLessThanOrEqual(10_000);
    } finally {
      await server.close();
    }
  });

  it('closes a connection whose body never finishes, with a 408, within requestTimeoutMs', async () => {
    const server = await startAdminServer({ store: db.store, token: TOKEN, requestTimeoutMs: 600 });
    try {
      const slowBody =
        'POST /types/t.slow/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
        `Authorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"rea`;
      const { reply, closedAfterMs } = await sendAndWait(server, slowBody, 5_000);
      expect(closedAfterMs).not.toBeNull();
      expect(closedAfterMs).toBeGreaterThanOrEqual(500);
      expect(closedAfterMs).toBeLessThan(2_000);
      expect(reply).toMatch(/^HTTP\/1\.1 408/);
      // Headers that never end are cut off as well.
      const slowHeaders = await sendAndWait(
        server,
        'GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ',
        5_000,
      );
      expect(slowHeaders.closedAfterMs).not.toBeNull();
      expect(slowHeaders.closedAfterMs).toBeLessThan(2_000);
    } finally {
      await server.close();
    }
  });

  it('refuses a requestTimeoutMs that is not a whole number of ms from 100 to 300000', async () => {
    for (const requestTimeoutMs of [0, 99, 300_001, 1.5, Number.NaN]) {
      await expect(
        startAdminServer({ store: db.store, token: TOKEN, requestTimeoutMs }),
        String(requestTimeoutMs),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
  });
});
