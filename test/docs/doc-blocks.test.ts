import { describe, expect, it } from 'vitest';
import { DocTestSyntaxError, originOf, programsOf } from './doc-blocks.js';

const prelude = (name: string) => `// prelude ${name}\nexport const ${name} = 1;\n`;
const parse = (markdown: string) => programsOf(markdown, 'doc.md', prelude);

describe('the doc test extractor', () => {
  it('makes one program of each ts block, and of a block and the ones that continue it', () => {
    const programs = parse(
      [
        '# Title', // 1
        '```ts', // 2
        'const a = 1;', // 3
        '```', // 4
        '```sh', // 5
        'npm test', // 6
        '```', // 7
        '<!-- doctest: continues -->', // 8
        '', // 9
        '```typescript', // 10
        'const b = a;', // 11
        '```', // 12
        '<!-- doctest: prelude=store,db run -->', // 13
        '```ts', // 14
        'console.log(store, db);', // 15
        '```', // 16
      ].join('\n'),
    );
    expect(programs.map((p) => [p.name, p.execution, p.preludes])).toEqual([
      ['doc.md:2', null, []],
      ['doc.md:14', 'run', ['store', 'db']],
    ]);
    expect(programs[0]?.source).toBe('const a = 1;\nconst b = a;\nexport {};\n');
    const second = programs[1];
    if (!second) throw new Error('no second program');
    expect(second.source.split('\n').slice(0, 5)).toEqual([
      '// prelude store',
      'export const store = 1;',
      '// prelude db',
      'export const db = 1;',
      'console.log(store, db);',
    ]);
    // A failure names the Markdown line (or the prelude's), not the generated program's.
    expect(originOf(second, 5)).toBe('doc.md:15');
    expect(originOf(second, 4)).toBe('test/docs/preludes/db.ts:2');
    expect(originOf(programs[0]!, 2)).toBe('doc.md:11');
  });

  it('takes a skip only with its reason, and refuses what it does not know', () => {
    const block = (directive: string) => `${directive}\n\`\`\`ts\nconst a = 1;\n\`\`\`\n`;
    expect(parse(block('<!-- doctest: skip reason="needs a Redis" -->'))[0]?.skipped).toBe('needs a Redis');
    for (const [directive, problem] of [
      ['<!-- doctest: skip -->', 'skip needs reason="why"'],
      ['<!-- doctest: skip reason="" -->', 'skip needs reason="why"'],
      ['<!-- doctest: runs -->', 'unknown doctest directive "runs"'],
      ['<!-- doctest: run=yes -->', 'run takes no value'],
      ['<!-- doctest: prelude -->', 'prelude needs a value'],
      ['<!-- doctest: run worker -->', 'one of run, serve and worker'],
      ['<!-- doctest: continues -->', 'continues, but no block comes before'],
    ] as const) {
      expect(() => parse(block(directive)), directive).toThrow(DocTestSyntaxError);
      expect(() => parse(block(directive)), directive).toThrow(problem);
    }
    expect(() => programsOf(block('<!-- doctest: prelude=nope -->'), 'doc.md')).toThrow(
      'doc.md:2: no prelude test/docs/preludes/nope.ts',
    );
    expect(() => parse('<!-- doctest: run -->\n```sh\nls\n```\n')).toThrow('not TypeScript');
    expect(() => parse('```ts\nconst a = 1;\n')).toThrow('doc.md:1: the block is never closed');
  });
});
