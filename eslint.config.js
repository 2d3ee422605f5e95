// Lint (npm run lint, part of npm test): ESLint's recommended rules and typescript-eslint's
// type-aware recommended ones over the whole tree (src/, scripts/, test/ and the root's config
// files). Formatting is Biome's (biome.json).
// A rule is switched off only with the reason beside it.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'src/generated/**', 'src/panel/assets/**', 'docs/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      // eslint.config.js itself is outside tsconfig.json (which holds only TypeScript): the project
      // service gives it a default project.
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Unused arguments and caught errors named with a leading underscore are kept on purpose
      // (a handler's signature, a catch that only recovers).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/storage/sqlite/**'],
    rules: {
      // better-sqlite3 is synchronous while the storage port is async (PostgreSQL's is): these
      // methods are async so that a statement's error reaches the caller as a rejection, as it
      // does on PostgreSQL, not as a throw before the promise exists.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['test/**', 'scripts/**'],
    rules: {
      // Tests and benchmark scripts read JSON bodies, database rows and metrics as untyped values
      // and assert on them (the assertions and the contract harness are the checks): typing each
      // read would only restate the OpenAPI documents the contract tests already hold them to.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // Test fakes and the benchmarks' SQLite sides stand in for async interfaces (the storage port,
      // a database connection, a clock's sleep) with synchronous bodies: async keeps their errors
      // rejections and their signatures the interface's, as for src/storage/sqlite/ above.
      '@typescript-eslint/require-await': 'off',
    },
  },
);
