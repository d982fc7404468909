import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '**/*.js',
      // The dashboard's script is written by hand and shipped as it is: linted like the sources.
      '!packages/runtime/assets/**/*.js',
      '**/*.cjs',
      '.tmp/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // A browser script: its globals are the DOM's, checked by tsc (packages/runtime/assets/tsconfig.json).
    files: ['packages/runtime/assets/**/*.js'],
    languageOptions: { sourceType: 'script' },
    rules: {
      'no-undef': 'off',
      'no-eval': 'error',
      'no-implied-eval': 'error',
      'no-new-func': 'error',
      // Values from the table become text, never markup.
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'write', 'writeln'].map((property) => ({
          property,
          message: 'build the DOM with createElement and text nodes; never parse strings as HTML',
        })),
      ],
    },
  },
  {
    files: ['packages/core/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                'pg',
                'mysql2',
                'mysql2/*',
                'better-sqlite3',
                'inversify',
                'node:*',
                'fs',
                'net',
                'http',
              ],
              message: '@asynccmd/core is pure: no drivers, no DI container, no I/O.',
            },
          ],
        },
      ],
    },
  },
);
