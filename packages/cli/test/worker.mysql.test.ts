import { openMysql } from '../../runtime/test/ops/databases.js';
import { describeWorker } from './worker.suite.js';

describeWorker('MariaDB', () => openMysql('cli_worker'));
