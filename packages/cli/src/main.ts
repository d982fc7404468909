#!/usr/bin/env node
import { runCli } from './run-cli.js';

const stderr = (text: string): boolean => process.stderr.write(text);

// pg warns, in a dozen lines on stderr, that it reads sslmode=prefer, require and verify-ca as
// verify-full. One line of the CLI's own says it instead; every other warning is Node's to print.
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const text = typeof warning === 'string' ? warning : warning.message;
  if (text.startsWith('SECURITY WARNING: The SSL modes')) {
    stderr(
      'asynccmd: note: pg treats sslmode=prefer, require and verify-ca as verify-full (the server certificate is verified)\n',
    );
    return;
  }
  (emitWarning as (w: string | Error, ...r: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr,
  env: process.env,
  exit: (code) => process.exit(code),
});
