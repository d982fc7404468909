// `node scripts/adapter-sizes.mjs [rev]`: the size of each adapter, as docs/store-kit.md prints it —
// the lines of every TypeScript file under its src/ (subfolders included), and the methods of its
// classes that implement the store (every member with a parameter list: constructor, getters and
// private helpers included; the private and protected ones also counted apart). With `rev`, of that
// commit (`git show`), else of the working tree.
import { execFileSync } from 'node:child_process';
import console from 'node:console';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const rev = process.argv[2];

/** Each adapter's source files, path → text. */
function sources(adapter) {
  const dir = `packages/${adapter}/src`;
  if (rev !== undefined) {
    const git = (...args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 26 });
    const files = git('ls-tree', '-r', '--name-only', rev, dir)
      .split('\n')
      .filter((f) => f.endsWith('.ts'));
    return new Map(files.map((f) => [f, git('show', `${rev}:${f}`)]));
  }
  if (!existsSync(join(ROOT, dir))) return new Map();
  return new Map(
    readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => join(e.parentPath, e.name))
      .map((f) => [relative(ROOT, f), readFileSync(f, 'utf8')]),
  );
}

/** The classes that implement a store (`… implements StoreEngine<…>` or `CommandStore<…>`, or extend one). */
function storeClasses(text) {
  const source = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
  return source.statements.filter(
    (s) =>
      ts.isClassDeclaration(s) &&
      (s.heritageClauses ?? []).some((h) =>
        h.types.some((t) =>
          /(^|\.)(StoreEngine|CommandStore|PostgresEngine|PostgresConnection)\b/.test(t.expression.getText()),
        ),
      ),
  );
}

function methods(cls) {
  let all = 0;
  let hidden = 0;
  for (const member of cls.members) {
    if (!('parameters' in member) || ts.isIndexSignatureDeclaration(member)) continue;
    all += 1;
    const flags = ts.getCombinedModifierFlags(member);
    const isPrivate = member.name !== undefined && ts.isPrivateIdentifier(member.name);
    if (isPrivate || flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) hidden += 1;
  }
  return [all, hidden];
}

const adapters = readdirSync(join(ROOT, 'packages')).filter((d) => d.startsWith('adapter-'));
for (const adapter of adapters) {
  const files = sources(adapter);
  if (files.size === 0) continue;
  let lines = 0;
  const classes = [];
  for (const [file, text] of files) {
    lines += text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    for (const cls of storeClasses(text))
      classes.push([`${cls.name?.text ?? '?'} (${file})`, ...methods(cls)]);
  }
  const described = classes.map(([name, all, hidden]) => `${name}: ${all} (${hidden})`).join('; ') || 'none';
  console.log(`${adapter}: ${lines} lines in ${files.size} files; methods ${described}`);
}
