// Runs a temporary database server (argv) for the fault suite and takes it down with itself if
// the test process goes away without stopping it (its stdin closes). Started as the leader of a
// process group of its own, so a SIGKILL of the group is a crash of the server and its guard at
// once. ASYNCCMD_GUARD_UID / _GID run the server as another user (PostgreSQL refuses root).
import { spawn } from 'node:child_process';
import process from 'node:process';

const [command, ...args] = process.argv.slice(2);
const as = (name) =>
  process.env[name] === undefined
    ? {}
    : { [name.endsWith('UID') ? 'uid' : 'gid']: Number(process.env[name]) };
const server = spawn(command, args, {
  stdio: ['ignore', 'inherit', 'inherit'],
  ...as('ASYNCCMD_GUARD_UID'),
  ...as('ASYNCCMD_GUARD_GID'),
});
server.once('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
// A SIGTERM to the group is the server's clean shutdown: the guard waits for it to end.
process.on('SIGTERM', () => undefined);
process.stdin.on('close', () => {
  // The PostgreSQL postmaster's children each lead a session of their own: they end on their
  // own once the postmaster is gone.
  server.kill('SIGKILL');
  process.kill(-process.pid, 'SIGKILL');
});
process.stdin.resume();
