import { openPostgres } from '../../runtime/test/ops/databases.js';
import { describeCli } from './cli.suite.js';

describeCli('PostgreSQL', () => openPostgres('ops_cli'));
