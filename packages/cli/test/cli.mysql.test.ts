import { openMysql } from '../../runtime/test/ops/databases.js';
import { describeCli } from './cli.suite.js';

describeCli('MariaDB', () => openMysql('ops_cli'));
