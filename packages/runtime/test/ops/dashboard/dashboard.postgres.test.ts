import { openPostgres } from '../databases.js';
import { describeDashboard } from './dashboard.suite.js';

describeDashboard('PostgreSQL', () => openPostgres('ops_dashboard'));
