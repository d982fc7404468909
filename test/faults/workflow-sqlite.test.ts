import { sqlite } from './databases.js';
import { describeWorkflowFaults } from './workflow.js';

describeWorkflowFaults(sqlite);
