import { createPostgresStore } from '@asynccmd/adapter-postgres';
import { dropPostgresSchema, POSTGRES_URL } from '../../runtime/test/ops/databases.js';
import { describeMigrationSql } from './migrate-sql.suite.js';

const schema = `cli_sql_${process.pid.toString(36)}`;

const dropSchema = () => dropPostgresSchema(schema);

describeMigrationSql('PostgreSQL', async () => {
  await dropSchema();
  return {
    cliArgs: ['--db', POSTGRES_URL, '--schema', schema],
    // NOTICEs (an IF NOT EXISTS that found the object) are quieted: stderr then holds errors only.
    shell: {
      command: 'psql',
      args: [
        '-q',
        '-X',
        '-v',
        'ON_ERROR_STOP=1',
        `${POSTGRES_URL}?options=-c%20client_min_messages%3Dwarning`,
      ],
    },
    qualify: (t) => `${schema}.${t}`,
    openStore: async () => createPostgresStore({ connectionString: POSTGRES_URL, schema }),
    dispose: dropSchema,
  };
});
