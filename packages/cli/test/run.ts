import { runCli } from '../src/run-cli.js';

export interface CliRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** Runs the CLI in-process and captures what it writes. */
export async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  let out = '';
  let err = '';
  const code = await runCli(args, {
    stdout: (s) => (out += s),
    stderr: (s) => (err += s),
    env,
  });
  return { code, out, err };
}
