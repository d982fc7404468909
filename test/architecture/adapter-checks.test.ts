import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/*
 * Every store's input is checked by core's checkedStore, once: an adapter is an engine that takes
 * checked input, so its sources call none of core's input checks. The only checks left are those
 * of each factory's own options, named here.
 */

const ROOT = join(import.meta.dirname, '..', '..');
const ADAPTERS = ['adapter-sqlite', 'adapter-postgres', 'adapter-mysql', 'adapter-pglite'];
/** The factories' own options, which they check themselves (they are no store call's input). */
const FACTORY_OPTIONS = [
  'busyTimeoutMs',
  'wakeupWindowMs',
  'listenReconnectMinMs',
  'listenReconnectMaxMs',
  'slowHeadSkip.slowMs',
  'slowHeadSkip.headEveryMs',
];
const CHECK_CALL =
  /\b(require[A-Z]\w*|optional[A-Z]\w*|refuseNul|StoreInput|typeLimitStore|typePauseStore|rateLimitStore)\s*\(\s*('[^']*')?/g;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

describe('adapters are engines', () => {
  for (const adapter of ADAPTERS) {
    it(`${adapter} calls no input check of core's (checkedStore makes them)`, () => {
      const found: string[] = [];
      for (const file of sources(join(ROOT, 'packages', adapter, 'src'))) {
        const text = readFileSync(file, 'utf8');
        if (/\bthis\.input\b|#input\b|\bnew StoreInput\b/.test(text)) found.push(`${file}: StoreInput`);
        for (const m of text.matchAll(CHECK_CALL)) {
          const option = m[2]?.slice(1, -1);
          if (m[1] === 'requireInt' && option !== undefined && FACTORY_OPTIONS.includes(option)) continue;
          found.push(`${file}: ${m[0]}`);
        }
      }
      expect(found).toEqual([]);
    });
  }
});
