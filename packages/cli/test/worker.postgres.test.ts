import { openPostgres } from '../../runtime/test/ops/databases.js';
import { describeWorker } from './worker.suite.js';

describeWorker('PostgreSQL', () => openPostgres('cli_worker'));
