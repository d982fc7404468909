import { openSqlite } from '../ops/databases.js';
import { describeCli } from './cli.suite.js';

describeCli('SQLite', openSqlite);
