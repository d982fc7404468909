import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentationFiles, originOf, programsOf, type DocProgram } from './doc-blocks.js';

/**
 * Every TypeScript example of README.md, docs/ and the package READMEs, compiled by strict
 * TypeScript against the built workspace packages (one program for all of them), and the complete
 * programs among them run against SQLite. Conventions: test/docs/doc-blocks.ts, docs/development.md.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const CLI_MAIN = join(ROOT, 'packages/cli/dist/main.js');
const RUN_TIMEOUT_MS = 20_000;
/** How long a `serve` program runs before its SIGTERM: enough for its IMMEDIATE commands to finish. */
const SETTLE_MS = 1_500;

const programs: DocProgram[] = documentationFiles(ROOT).flatMap((file) =>
  programsOf(readFileSync(join(ROOT, file), 'utf8'), file),
);

/** The compiler options of a strict TypeScript application on Node.js. */
const COMPILER_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  lib: ['lib.es2023.d.ts'],
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  skipLibCheck: true,
  // The inversify examples' decorators, as that package asks for.
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  types: ['node'],
  sourceMap: false,
};

/** A slug of `file:line`, as a file name. */
const fileNameOf = (program: DocProgram) => `${program.name.replace(/[^A-Za-z0-9]+/g, '_')}.ts`;

interface Compiled {
  readonly problems: ReadonlyMap<string, readonly string[]>;
  readonly outDir: string;
}

describe('the documentation examples', () => {
  // Below the repository, so the examples resolve @asynccmd/* to the built workspace packages.
  const work = mkdtempSync(join(ROOT, '.tmp', 'doctest-'));
  let compiled: Compiled;

  beforeAll(() => {
    const sources = join(work, 'examples');
    mkdirSync(sources, { recursive: true });
    // "Your application's" modules the examples import (`../src/orders.js`), beside them as here.
    cpSync(join(ROOT, 'test/docs/src'), join(work, 'src'), { recursive: true });
    writeFileSync(join(work, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const byPath = new Map<string, DocProgram>();
    for (const program of programs.filter((p) => p.skipped === null)) {
      const path = join(sources, fileNameOf(program));
      writeFileSync(path, program.source);
      byPath.set(path, program);
    }
    const outDir = join(work, 'out');
    const fixtures = ts.sys.readDirectory(join(work, 'src'), ['.ts']);
    const tsProgram = ts.createProgram({
      rootNames: [...byPath.keys(), ...fixtures],
      options: { ...COMPILER_OPTIONS, rootDir: work, outDir },
    });
    const emitted = tsProgram.emit();
    const problems = new Map<string, string[]>();
    for (const diagnostic of [...ts.getPreEmitDiagnostics(tsProgram), ...emitted.diagnostics]) {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n  ');
      const program = diagnostic.file && byPath.get(diagnostic.file.fileName);
      let where = diagnostic.file ? relative(ROOT, diagnostic.file.fileName) : '(no file)';
      if (diagnostic.file && diagnostic.start !== undefined) {
        const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
        where = program ? originOf(program, line + 1) : `${where}:${line + 1}`;
      }
      const key = program ? program.name : '(outside the examples)';
      problems.set(key, [...(problems.get(key) ?? []), `${where}: TS${diagnostic.code} ${message}`]);
    }
    compiled = { problems, outDir };
  }, 120_000);

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('are found, and the files and fixtures beside them compile', () => {
    expect(programs.length).toBeGreaterThan(40);
    expect(compiled.problems.get('(outside the examples)') ?? []).toEqual([]);
  });

  it.each(programs.map((p) => [p.name, p] as const))('%s compiles', (_name, program) => {
    expect(program.skipped, `${program.name} is skipped`).toBeNull();
    expect((compiled.problems.get(program.name) ?? []).join('\n')).toBe('');
  });

  const runnable = programs.filter((p) => p.execution !== null && p.skipped === null);
  it.each(runnable.map((p) => [p.name, p.execution, p] as const))(
    '%s runs (%s) on SQLite',
    async (_name, execution, program) => {
      expect(compiled.problems.get(program.name) ?? [], 'it compiles first').toEqual([]);
      const js = join(compiled.outDir, 'examples', fileNameOf(program).replace(/\.ts$/, '.js'));
      const cwd = mkdtempSync(join(tmpdir(), 'asynccmd-doctest-'));
      try {
        if (execution === 'worker') {
          await runWorker(js, cwd, program.name);
        } else {
          const result = await runNode([js], cwd, execution === 'serve' ? SETTLE_MS : null);
          expect(result.code, `${program.name} exited ${result.code}\n${result.stderr}`).toBe(0);
        }
        expect(failedCommands(cwd), `${program.name}: commands that failed`).toEqual([]);
      } finally {
        rmSync(cwd, { recursive: true, force: true });
      }
    },
    RUN_TIMEOUT_MS * 2,
  );
});

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs node; with `signalAfterMs`, a program that runs until a signal gets SIGTERM after that long. */
function runNode(args: readonly string[], cwd: string, signalAfterMs: number | null): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: RUN_TIMEOUT_MS,
    });
    if (signalAfterMs !== null) {
      const timer = setTimeout(() => child.kill('SIGTERM'), signalAfterMs);
      child.on('close', () => clearTimeout(timer));
    }
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The commands in `cwd`'s app.db whose last attempt failed (none when there is no such table). */
function failedCommands(cwd: string): string[] {
  const file = join(cwd, 'app.db');
  if (!existsSync(file)) return [];
  const db = new Database(file, { readonly: true });
  try {
    const table = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'async_command'")
      .get();
    if (table === undefined) return [];
    return db
      .prepare<[], { type: string; status: string; last_error: string }>(
        "SELECT type, status, last_error FROM async_command WHERE last_error IS NOT NULL OR status = 'DEAD'",
      )
      .all()
      .map((row) => `${row.type} ${row.status}: ${row.last_error}`);
  } finally {
    db.close();
  }
}

/** `asynccmd migrate`, then `asynccmd worker` with the module until it has started; SIGTERM: exit 0. */
async function runWorker(module: string, cwd: string, name: string): Promise<void> {
  const db = `sqlite:${join(cwd, 'app.db')}`;
  const migrate = spawnSync(process.execPath, [CLI_MAIN, '--db', db, 'migrate'], { cwd, encoding: 'utf8' });
  expect(migrate.status, migrate.stderr).toBe(0);
  const child = spawn(process.execPath, [CLI_MAIN, '--db', db, 'worker', '--executors', module], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const started = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), RUN_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes('asynccmd worker started')) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      resolve(stdout.includes('asynccmd worker started'));
    });
  });
  if (child.exitCode === null) child.kill('SIGTERM');
  const code = await exited;
  expect(started, `${name}: asynccmd worker did not start\n${stderr}${stdout}`).toBe(true);
  expect(code, `${name}: asynccmd worker exited ${code}\n${stderr}`).toBe(0);
}
