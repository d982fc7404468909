/** A store transaction: READ COMMITTED whatever the session's default, as the claim statements need. */
export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';
/**
 * The store transaction's BEGIN and COMMIT as statements prepared once per connection, so the
 * server does not parse them again for every transaction. The names are the store's own (pg's
 * queries and the application never use them); a COMMIT prepared this way still ends an aborted
 * transaction, as the server lets transaction-ending statements through.
 */
export const BEGIN_STEP = { name: 'asynccmd_begin_read_committed', text: BEGIN } as const;
export const COMMIT_STEP = { name: 'asynccmd_commit', text: 'COMMIT' } as const;
