import { openSqlite } from '../databases.js';
import { describeDashboard } from './dashboard.suite.js';

// The demo's database: this run also takes the README's screenshot.
describeDashboard('SQLite', openSqlite, { screenshot: true });
