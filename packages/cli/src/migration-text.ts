import type { MigrationScript } from '@asynccmd/core';

/**
 * A migration script as a SQL file for psql, mysql or sqlite3: one statement after another, each
 * ended by `;`, a comment naming each version, in one transaction where the database allows it.
 */
export function renderMigrationScript(script: MigrationScript, dialect: string): string {
  if (script.versions.length === 0) {
    return `-- asynccmd: the ${dialect} command table is up to date; no migration to apply\n`;
  }
  const versions = script.versions.map((v) => v.version).join(', ');
  const lines = [
    `-- asynccmd migrate --print-sql: the ${dialect} DDL of migration version(s) ${versions}.`,
    '-- Review it, then apply it as it stands (in this order); afterwards `asynccmd migrate` has nothing to do.',
    ...(script.transactional
      ? ['BEGIN;']
      : ['-- Each DDL statement commits on its own here: if one fails, fix the cause and apply the rest.']),
    '',
    ...script.setup.map(statement),
    ...script.versions.flatMap((v) => [
      '',
      `-- version ${v.version}: ${v.name}`,
      ...v.statements.map(statement),
    ]),
    ...(script.transactional ? ['', 'COMMIT;'] : []),
    ...(script.afterCommit !== undefined && script.afterCommit.length > 0
      ? [
          '',
          '-- Then, outside any transaction (each statement commits batch by batch, holding row locks of one batch at a time):',
          ...script.afterCommit.map(statement),
        ]
      : []),
  ];
  return `${lines.join('\n')}\n`;
}

function statement(sql: string): string {
  return `${sql.trim()};`;
}
