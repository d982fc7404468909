import { postgres } from './databases.js';
import { describeWorkflowFaults } from './workflow.js';

describeWorkflowFaults(postgres);
