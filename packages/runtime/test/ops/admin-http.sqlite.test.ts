import { describeAdminHttp } from './admin-http.suite.js';
import { openTempSqlite } from './support.js';

describeAdminHttp('SQLite', async () => ({ ...(await openTempSqlite()), cliArgs: [] }));
