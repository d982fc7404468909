import { describeAdminHttp } from './admin-http.suite.js';
import { openPostgres } from './databases.js';

describeAdminHttp('PostgreSQL', () => openPostgres('ops_admin_http'));
