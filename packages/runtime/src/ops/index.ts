// @asynccmd/runtime/ops: what the admin HTTP API and the asynccmd CLI are built from, for operator
// tools of your own, so that every front end shows the same views and takes input by the same rules.
export { applyAdminTransition } from './admin-actions.js';
export { readStats, type StatsView } from './stats-view.js';
export {
  formatProgress,
  toStatusListItem,
  toStatusResource,
  type CommandStatusListItem,
  type CommandStatusResource,
} from './status-resource.js';
export { formatDuration, parseDuration } from './duration.js';
export {
  DEFAULT_LIST_LIMIT,
  MAX_LIST_LIMIT,
  parseBizKey,
  parseCursor,
  parseReason,
  parseStatuses,
  parseType,
  requireCommandId,
} from './validation.js';
export {
  addSchedule,
  parseNewSchedule,
  readSchedules,
  removeSchedule,
  setSchedulePaused,
  toScheduleView,
  type NewScheduleInput,
  type ScheduleView,
} from './schedules-view.js';
export {
  parsePauseReason,
  readPausedTypes,
  setTypePaused,
  type PausedTypeView,
  type TypePauseChange,
} from './type-pauses-view.js';
export { cancelWorkflowView, readWorkflow, type WorkflowView } from './workflows-view.js';
export { setKeyLimit, setKeyRateLimit, setRateLimit, type FlowLimitChange } from './flow-limits-view.js';
