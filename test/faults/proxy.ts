import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a database server: `cut()` drops every connection through it
 * and refuses new ones until it ends, as a network partition or a failing load balancer would,
 * without touching the server other tests share.
 */
export class LoopbackProxy {
  readonly #sockets = new Set<Socket>();
  #server: Server | null = null;
  #cutUntil = 0;
  port = 0;

  constructor(private target: { readonly host: string; readonly port: number }) {}

  /** Routes new connections to `target` and drops the current ones, as a failover of a virtual IP would. */
  switchTo(target: { readonly host: string; readonly port: number }): void {
    this.target = target;
    for (const s of this.#sockets) s.destroy();
  }

  async start(): Promise<void> {
    const server = createServer((client) => this.#accept(client));
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy has no TCP address');
    this.port = address.port;
  }

  #accept(client: Socket): void {
    client.on('error', () => undefined);
    if (Date.now() < this.#cutUntil) {
      client.destroy();
      return;
    }
    const upstream = connect(this.target.port, this.target.host);
    upstream.on('error', () => undefined);
    for (const s of [client, upstream]) {
      // Small request/response packets: Nagle's algorithm would add a delayed-ACK stall to each.
      s.setNoDelay(true);
      this.#sockets.add(s);
      s.once('close', () => {
        this.#sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Drops every connection now and refuses new ones for `ms`. */
  cut(ms: number): void {
    this.#cutUntil = Date.now() + ms;
    for (const s of this.#sockets) s.destroy();
  }

  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    const server = this.#server;
    this.#server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
