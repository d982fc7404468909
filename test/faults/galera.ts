import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { createConnection } from 'mysql2/promise';
import { freePort, ProcessServer, removeOnThrow, runOrThrow } from './temp-servers.js';

const PROVIDER = process.env.ASYNCCMD_GALERA_PROVIDER ?? '/usr/lib/galera/libgalera_smm.so';

/**
 * Who the nodes run as. As root, the `mysql` account: the joiner's rsync daemon, started as root,
 * would switch to `nobody` and could not write the data directory.
 */
function nodeUser(): string {
  const me = userInfo().username;
  if (userInfo().uid !== 0) return me;
  return spawnSync('id', ['-u', 'mysql']).status === 0 ? 'mysql' : me;
}

function owner(user: string): { uid: number; gid: number } {
  const id = (flag: string) => Number(spawnSync('id', [flag, user], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** The loopback ports one node listens on: SQL, group communication, IST and SST. */
interface NodePorts {
  readonly sql: number;
  readonly gcomm: number;
  readonly ist: number;
  readonly sst: number;
}

/**
 * One node of a Galera cluster of the suite's own, with its own data directory and ports. It
 * counts as up once it is synced (wsrep_ready), not merely accepting connections: a joiner answers
 * before its state transfer has finished.
 */
class GaleraNode extends ProcessServer {
  readonly kind = 'mysql' as const;
  /** The first node bootstraps the cluster on its first start only. */
  bootstrap: boolean;

  constructor(
    dir: string,
    readonly ports: NodePorts,
    private readonly peers: readonly NodePorts[],
    bootstrap: boolean,
  ) {
    super(dir, ports.sql);
    this.bootstrap = bootstrap;
  }

  protected command(): [string, string[]] {
    const p = this.ports;
    const args = [
      '--no-defaults',
      `--datadir=${join(this.dir, 'data')}`,
      `--port=${p.sql}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(this.dir, 'mariadb.sock')}`,
      `--pid-file=${join(this.dir, 'mariadb.pid')}`,
      `--user=${nodeUser()}`,
      '--innodb-buffer-pool-size=64M',
      ...(process.env.GALERA_SERVER_DEFAULTS ? [] : ['--innodb-flush-log-at-trx-commit=2']),
      '--binlog-format=ROW',
      '--innodb-autoinc-lock-mode=2',
      '--wsrep-on=ON',
      `--wsrep-provider=${PROVIDER}`,
      '--wsrep-cluster-name=asynccmd_faults',
      `--wsrep-cluster-address=gcomm://${this.peers.map((n) => `127.0.0.1:${n.gcomm}`).join(',')}`,
      '--wsrep-node-address=127.0.0.1',
      `--wsrep-node-incoming-address=127.0.0.1:${p.sql}`,
      `--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:${p.gcomm};ist.recv_addr=127.0.0.1:${p.ist};gcache.size=64M`,
      `--wsrep-sst-receive-address=127.0.0.1:${p.sst}`,
      '--wsrep-sst-method=rsync',
      ...(process.env.GALERA_SERVER_DEFAULTS ? [] : ['--wsrep-slave-threads=2']),
    ];
    if (this.bootstrap) args.push('--wsrep-new-cluster');
    return ['mariadbd', args];
  }

  protected async ping(): Promise<void> {
    const conn = await createConnection({ host: '127.0.0.1', port: this.port, user: 'root' });
    try {
      const [rows] = await conn.query("SHOW STATUS LIKE 'wsrep_ready'");
      const ready = (rows as { Value?: string }[])[0]?.Value;
      if (ready !== 'ON') throw new Error(`wsrep_ready is ${String(ready)}`);
    } finally {
      await conn.end();
    }
  }
}

/** A three-node MariaDB Galera cluster on loopback ports: never the shared server. */
export interface GaleraCluster {
  /** Each node's SQL port, in boot order. */
  readonly ports: readonly number[];
  /** wsrep_cluster_size as node `index` sees it. */
  clusterSize(index?: number): Promise<number>;
  /** SIGKILL of node `index` (not the first: it would have to bootstrap again). */
  crash(index: number): Promise<void>;
  /** Starts node `index` again; it rejoins by a state transfer and resolves once it is synced. */
  restart(index: number): Promise<void>;
  /** Stops every node and removes their data directories. */
  dispose(): Promise<void>;
}

async function clusterSize(port: number): Promise<number> {
  const conn = await createConnection({ host: '127.0.0.1', port, user: 'root' });
  try {
    const [rows] = await conn.query("SHOW STATUS LIKE 'wsrep_cluster_size'");
    return Number((rows as { Value?: string }[])[0]?.Value ?? 0);
  } finally {
    await conn.end();
  }
}

async function distinctPorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/**
 * Boots `size` nodes (default 3): the first bootstraps a new cluster, the others join it one at a
 * time (each takes a full state transfer by rsync), and resolves once every node counts them all.
 * Every node runs under the temporary servers' guard, so none outlives the test process.
 */
export async function startGaleraCluster(size = 3): Promise<GaleraCluster> {
  const free = await distinctPorts(size * 4);
  const ports: NodePorts[] = Array.from({ length: size }, (_, i) => ({
    sql: free[i * 4]!,
    gcomm: free[i * 4 + 1]!,
    ist: free[i * 4 + 2]!,
    sst: free[i * 4 + 3]!,
  }));
  const nodes: GaleraNode[] = [];
  const dispose = async (): Promise<void> => {
    // Joiners first, the bootstrap node last: no node is left alone thinking it lost the others.
    for (const node of [...nodes].reverse()) await node.dispose();
  };
  const formed = async (): Promise<void> => {
    const until = Date.now() + 60_000;
    for (;;) {
      const sizes = await Promise.all(nodes.map((n) => clusterSize(n.port)));
      if (sizes.every((s) => s === size)) return;
      if (Date.now() > until) throw new Error(`the Galera cluster did not form: sizes ${sizes.join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  try {
    for (const [i, p] of ports.entries()) {
      const dir = mkdtempSync(join(tmpdir(), `asynccmd-faults-galera${i + 1}-`));
      const user = nodeUser();
      const { uid, gid } = owner(user);
      chownSync(dir, uid, gid);
      // A joiner's data is replaced by its state transfer; it still needs a directory to start in.
      removeOnThrow(dir, () =>
        runOrThrow('mariadb-install-db', [
          '--no-defaults',
          `--datadir=${join(dir, 'data')}`,
          `--user=${user}`,
          '--auth-root-authentication-method=normal',
          '--skip-test-db',
        ]),
      );
      const node = new GaleraNode(dir, p, ports, i === 0);
      nodes.push(node);
      await node.start();
      node.bootstrap = false;
    }
    await formed();
  } catch (error) {
    await dispose().catch(() => undefined);
    for (const node of nodes) rmSync(node.dir, { recursive: true, force: true });
    throw error;
  }
  return {
    ports: nodes.map((n) => n.port),
    clusterSize: (index = 0) => clusterSize(nodes[index]!.port),
    crash: (index) => nodes[index]!.crash(),
    async restart(index) {
      await nodes[index]!.start();
      await formed();
    },
    dispose,
  };
}
