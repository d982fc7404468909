import { postgres } from './databases.js';
import { describeFaults } from './suite.js';

describeFaults(postgres);
