import { openMysql } from '../databases.js';
import { describeDashboard } from './dashboard.suite.js';

describeDashboard('MariaDB', () => openMysql('ops_dashboard'));
