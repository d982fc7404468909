import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The TypeScript examples of the documentation, as the doc test compiles and runs them.
 *
 * Every ```ts / ```typescript block of a Markdown file is an example. HTML comments on the lines
 * just above its fence (blank lines may separate them) say what the doc test needs:
 *   <!-- doctest: prelude=store,mailer -->  prepend test/docs/preludes/store.ts, then mailer.ts:
 *                                           what the snippet assumes (a store, a mailer, …)
 *   <!-- doctest: continues -->             the block goes on from the previous one (one program)
 *   <!-- doctest: run -->                   a complete program: run with node in an empty
 *                                           temporary directory (SQLite files land there); exit 0
 *   <!-- doctest: serve -->                 a program that runs until a signal: run as `run`,
 *                                           given SIGTERM once it has settled; exit 0
 *   <!-- doctest: worker -->                a worker module: `asynccmd worker` runs it on SQLite
 *   <!-- doctest: skip reason="…" -->       not compiled; only with a reason
 * `run`, `serve` and `worker` may stand on any block of a program. After a run, no command in the
 * directory's app.db may have failed.
 */

export const PRELUDES = join(import.meta.dirname, 'preludes');

/** Where a stretch of a generated program's lines came from. */
export interface Segment {
  /** 1-based line of the generated program where the stretch starts. */
  readonly programLine: number;
  readonly lineCount: number;
  /** The Markdown file (or prelude file), relative to the repository. */
  readonly file: string;
  /** 1-based line of `file` where the stretch starts. */
  readonly line: number;
}

export interface DocProgram {
  /** `file:line` of its first block: how failures name it. */
  readonly name: string;
  readonly file: string;
  readonly line: number;
  readonly preludes: readonly string[];
  readonly execution: 'run' | 'serve' | 'worker' | null;
  /** Set when a block says `skip`: the reason. */
  readonly skipped: string | null;
  readonly source: string;
  readonly segments: readonly Segment[];
}

interface Block {
  /** 1-based line of the block's first code line. */
  readonly line: number;
  readonly code: string;
  readonly directives: Directives;
}

interface Directives {
  readonly preludes: readonly string[];
  readonly continues: boolean;
  readonly execution: 'run' | 'serve' | 'worker' | null;
  readonly skip: string | null;
}

export class DocTestSyntaxError extends Error {}

const FENCE = /^```(ts|typescript)\s*$/;
const DIRECTIVE = /^<!--\s*doctest:(.*?)-->\s*$/;
const WORD = /\s*([a-z]+)(?:=(?:"([^"]*)"|([^\s"]+)))?/y;

function parseDirectives(text: string, where: string): Directives {
  const words = new Map<string, string | undefined>();
  const rest = text.trim();
  let at = 0;
  while (at < rest.length) {
    WORD.lastIndex = at;
    const match = WORD.exec(rest);
    if (!match || match[0].trim() === '')
      throw new DocTestSyntaxError(`${where}: cannot read "${rest.slice(at)}"`);
    at = WORD.lastIndex;
    const [, key = '', quoted, bare] = match;
    if (!['prelude', 'continues', 'run', 'serve', 'worker', 'skip', 'reason'].includes(key)) {
      throw new DocTestSyntaxError(`${where}: unknown doctest directive "${key}"`);
    }
    const value = quoted ?? bare;
    if ((key === 'prelude' || key === 'reason') !== (value !== undefined)) {
      throw new DocTestSyntaxError(
        `${where}: ${key} ${value === undefined ? 'needs a value' : 'takes no value'}`,
      );
    }
    words.set(key, value);
  }
  const reason = words.get('reason');
  if (words.has('skip') && !reason?.trim()) throw new DocTestSyntaxError(`${where}: skip needs reason="why"`);
  if (!words.has('skip') && words.has('reason')) {
    throw new DocTestSyntaxError(`${where}: reason= goes with skip`);
  }
  const executions = (['run', 'serve', 'worker'] as const).filter((word) => words.has(word));
  if (executions.length > 1) throw new DocTestSyntaxError(`${where}: one of run, serve and worker`);
  const preludes = words.get('prelude')?.split(',') ?? [];
  for (const name of preludes) {
    if (!/^[a-z0-9-]+$/.test(name)) throw new DocTestSyntaxError(`${where}: "${name}" is not a prelude name`);
  }
  return {
    preludes,
    continues: words.has('continues'),
    execution: executions[0] ?? null,
    skip: words.has('skip') ? (reason ?? null) : null,
  };
}

/** The blocks of one Markdown text, with their directives. */
function blocksOf(markdown: string, file: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\S*)/.exec(lines[i] ?? '');
    if (!fence) continue;
    let end = i + 1;
    while (end < lines.length && !/^```\s*$/.test(lines[end] ?? '')) end++;
    if (end === lines.length) throw new DocTestSyntaxError(`${file}:${i + 1}: the block is never closed`);
    if (FENCE.test(lines[i] ?? '')) {
      const comments: string[] = [];
      for (let j = i - 1; j >= 0; j--) {
        const line = (lines[j] ?? '').trim();
        if (line === '' && comments.length === 0) continue;
        const directive = DIRECTIVE.exec(line);
        if (!directive) break;
        comments.unshift(directive[1] ?? '');
      }
      blocks.push({
        line: i + 2,
        code: lines.slice(i + 1, end).join('\n'),
        directives: parseDirectives(comments.join(' '), `${file}:${i + 1}`),
      });
    } else if (DIRECTIVE.test((lines[i - 1] ?? '').trim())) {
      throw new DocTestSyntaxError(
        `${file}:${i + 1}: a doctest directive above a block that is not TypeScript`,
      );
    }
    i = end;
  }
  return blocks;
}

/** The programs of one Markdown file: each block, or a block and the ones that continue it. */
export function programsOf(
  markdown: string,
  file: string,
  readPrelude: (name: string) => string | null = defaultPrelude,
): DocProgram[] {
  const programs: DocProgram[] = [];
  let current: { first: Block; blocks: Block[] } | null = null;
  const finish = () => {
    if (current) programs.push(assemble(file, current.first, current.blocks, readPrelude));
  };
  for (const block of blocksOf(markdown, file)) {
    if (block.directives.continues) {
      if (!current)
        throw new DocTestSyntaxError(`${file}:${block.line - 1}: continues, but no block comes before`);
      if (block.directives.preludes.length > 0) {
        throw new DocTestSyntaxError(
          `${file}:${block.line - 1}: a continuing block takes its program's preludes`,
        );
      }
      current.blocks.push(block);
    } else {
      finish();
      current = { first: block, blocks: [block] };
    }
  }
  finish();
  return programs;
}

function defaultPrelude(name: string): string | null {
  const path = join(PRELUDES, `${name}.ts`);
  return existsSync(path) ? readFileSync(path, 'utf8') : null;
}

function assemble(
  file: string,
  first: Block,
  blocks: readonly Block[],
  readPrelude: (name: string) => string | null,
): DocProgram {
  const parts: string[] = [];
  const segments: Segment[] = [];
  let programLine = 1;
  const add = (text: string, from: string, line: number) => {
    const body = text.endsWith('\n') ? text.slice(0, -1) : text;
    const lineCount = body.split('\n').length;
    parts.push(body);
    segments.push({ programLine, lineCount, file: from, line });
    programLine += lineCount;
  };
  for (const name of first.directives.preludes) {
    const text = readPrelude(name);
    if (text === null) {
      throw new DocTestSyntaxError(`${file}:${first.line - 1}: no prelude test/docs/preludes/${name}.ts`);
    }
    add(text, `test/docs/preludes/${name}.ts`, 1);
  }
  for (const block of blocks) add(block.code, file, block.line);
  const execution = blocks.map((b) => b.directives.execution).find((e) => e !== null) ?? null;
  const skipped = blocks.map((b) => b.directives.skip).find((s) => s !== null) ?? null;
  return {
    name: `${file}:${first.line - 1}`,
    file,
    line: first.line - 1,
    preludes: first.directives.preludes,
    execution,
    skipped,
    // A module even when the snippet imports nothing, so programs never share a global scope.
    source: `${parts.join('\n')}\nexport {};\n`,
    segments,
  };
}

/** `file:line` of a 1-based line of a program. */
export function originOf(program: DocProgram, programLine: number): string {
  for (const segment of program.segments) {
    if (programLine >= segment.programLine && programLine < segment.programLine + segment.lineCount) {
      return `${segment.file}:${segment.line + programLine - segment.programLine}`;
    }
  }
  return `${program.name} (the closing export)`;
}

/** The documentation whose examples are tested: README.md, docs/*.md, packages/*\/README.md. */
export function documentationFiles(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  const readmes = readdirSync(join(root, 'packages'))
    .map((dir) => `packages/${dir}/README.md`)
    .filter((f) => existsSync(join(root, f)));
  return ['README.md', ...docs.sort(), ...readmes.sort()];
}
