import { defineConfig } from 'vitest/config';

export default defineConfig({
  oxc: { decorator: { legacy: true, emitDecoratorMetadata: true } },
  test: {
    include: [
      'packages/*/test/**/*.test.ts',
      'test/**/*.test.ts',
      'demo/test/**/*.test.ts',
      'bench/test/**/*.test.ts',
    ],
    exclude: ['**/node_modules/**', '**/dist/**'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file owns its schema/database/table prefix, so files may run side by side.
    fileParallelism: true,
    // The JSON report lets .ci/run print one plain "N passed, N failed" closing line.
    reporters: ['default', ['json', { outputFile: '.tmp/vitest-report.json' }]],
  },
});
