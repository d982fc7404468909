import { openMysql } from '../ops/databases.js';
import { describeCli } from './cli.suite.js';

describeCli('MariaDB', () => openMysql('ops_cli'));
