/*
 * What links to a command beside its row: its dependency edges (as dependant and as dependency)
 * and its workflow step. A purge deletes them with the command (store.ts purge, and history.ts
 * before a partition is dropped).
 */

/** The tables and columns that name a command, by the command table's name. */
export function commandLinks(t: string): readonly { readonly table: string; readonly column: string }[] {
  return [
    { table: `\`${t}_dependencies\``, column: 'dependant_id' },
    { table: `\`${t}_dependencies\``, column: 'dependency_id' },
    { table: `\`${t}_workflow_steps\``, column: 'command_id' },
  ];
}

/** Whether any edge or workflow step exists (`linked` 1): else a purge has no links to take. */
export const anyLinksSql = (t: string): string =>
  `SELECT EXISTS (SELECT 1 FROM \`${t}_dependencies\`) OR EXISTS (SELECT 1 FROM \`${t}_workflow_steps\`) AS linked`;
