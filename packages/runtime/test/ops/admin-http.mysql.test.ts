import { describeAdminHttp } from './admin-http.suite.js';
import { openMysql } from './databases.js';

describeAdminHttp('MariaDB', () => openMysql('ops_admin_http'));
