import { mysql } from './databases.js';
import { describeFaults } from './suite.js';

describeFaults(mysql);
