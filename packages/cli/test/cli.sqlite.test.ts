import { openSqlite } from '../../runtime/test/ops/databases.js';
import { describeCli } from './cli.suite.js';

describeCli('SQLite', openSqlite);
