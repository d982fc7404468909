import { mysql } from './databases.js';
import { describeWorkflowFaults } from './workflow.js';

describeWorkflowFaults(mysql);
