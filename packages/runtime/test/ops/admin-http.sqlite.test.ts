import { describeAdminHttp } from './admin-http.suite.js';
import { openSqlite } from './databases.js';

describeAdminHttp('SQLite', openSqlite);
