import { sqlite } from './databases.js';
import { describeFaults } from './suite.js';

describeFaults(sqlite);
