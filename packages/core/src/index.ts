// The public API of @asynccmd/core: what applications, the runtime and ORM bridges use. What
// only adapters need is in @asynccmd/core/store-kit; core's own helpers stay unexported.
export { LIMITS } from './limits.js';
export {
  ACTIVE_STATUSES,
  COMMAND_STATUSES,
  type CommandStatus,
  FINISHED_STATUSES,
  isCommandStatus,
} from './status.js';
export {
  AsyncCommandError,
  type AsyncCommandErrorCode,
  CommandNotFoundError,
  IdempotencyConflictError,
  IllegalTransitionError,
  InvalidArgumentError,
  InvalidCommandIdError,
  InvalidIdentifierError,
  isAsyncCommandError,
  PayloadNotSerialisableError,
  PayloadTooLargeError,
  ResultNotSerialisableError,
  ResultTooLargeError,
  StaleClaimError,
  StoreContentionError,
  TransactionClosedError,
  TransactionRolledBackError,
  UnknownCommandTypeError,
} from './errors.js';
export {
  ATTEMPT_OUTCOMES,
  type AttemptOutcome,
  type AttemptRecord,
  type ClaimedCommand,
  type ClaimRef,
  type CommandHeaders,
  type CommandId,
  type CommandProgress,
  type CommandRecord,
  type CompletedAttempt,
  DEFAULT_PRIORITY,
  EARLIEST_STORED_TIME,
  type Json,
  LATEST_STORED_TIME,
  type NewCommand,
  parseCommandId,
  PRIORITY_RANGE,
  type ProgressReport,
  requireProgress,
} from './command.js';
export { describeFailure, redactErrorText, truncateErrorText } from './error-text.js';
export { serialisePayload, serialiseResult } from './payload.js';
export {
  type BackoffPolicy,
  exponentialBackoff,
  type ExponentialBackoffOptions,
  immediateBackoff,
} from './backoff.js';
export {
  decideDispatch,
  type DispatchDecision,
  EXECUTION_MODES,
  type ExecutionMode,
  type PoolCapacity,
} from './dispatch.js';
export { adaptiveQueueSize, type ClaimSizing, movingAverage } from './claim-sizing.js';
export {
  ADMIN_TRANSITIONS,
  type AdminTransition,
  cancel,
  claim,
  type CommandState,
  decideFailure,
  decideShutdownAbort,
  DEFAULT_MAX_RESCUES,
  fail,
  type FailureOutcome,
  heartbeat,
  kill,
  reclaim,
  release,
  requeue,
  retriesLeft,
  retry,
  succeed,
  type TransitionError,
  type TransitionName,
} from './transitions.js';
export { isTerminalOperationState, operationState, type OperationState } from './status-view.js';
export {
  type AdminError,
  type ClaimByIdParams,
  type ClaimDueParams,
  type CommandStore,
  type CommitRiding,
  type FailedAttempt,
  type HealthProbe,
  type HealthProbeParams,
  type IdempotentInsertOptions,
  type InsertResult,
  type ListPage,
  type ListQuery,
  ON_PENDING_CHOICES,
  type OnPending,
  type OutcomeCount,
  type OutcomeCountParams,
  type PausedType,
  type PurgeParams,
  type ReclaimedCommand,
  type ReclaimParams,
  type RevocationChannel,
  type RevokedClaim,
  type StatsRow,
  type StoreCapabilities,
  type StoreStats,
  type TransactionalCompletion,
  type AttemptSavepoints,
  type TypeLimit,
  type TypeLimitStore,
  type TypePauseStore,
  type WakeupChannel,
} from './ports/store.js';
export {
  type RateGrant,
  type RateLimit,
  type RateLimitSpec,
  type RateLimitState,
  type RateLimitStore,
  type RateTakeParams,
} from './ports/rate-limits.js';
export { defaultRateBurst, type RateBucket, rateLimitProblem } from './rate-limits.js';
export {
  type CleanupHolder,
  type CleanupHolderKind,
  type CleanupHorizon,
  type CleanupHorizonProbe,
} from './ports/cleanup-horizon.js';
export {
  type EnqueueTickResult,
  requireScheduleName,
  type RunTimeScheduleSettings,
  ScheduleDeclaredInCodeError,
  type ScheduleDefinition,
  ScheduleExistsError,
  scheduleNameProblem,
  ScheduleNotFoundError,
  type ScheduleRecord,
  type ScheduleStore,
  type ScheduleTick,
} from './ports/schedules.js';
export { type MigrationScript, type MigrationScriptOptions, type MigrationStep } from './ports/migrations.js';
export { type Clock, systemClock } from './ports/clock.js';
export { type TokenSource } from './ports/token-source.js';
export { type CommandEvent, type CommandEventKind, type CommandEventListener } from './ports/events.js';
export { type Logger, silentLogger } from './ports/logger.js';
export { type ExecutionInterceptor, type SubmitHeadersProvider } from './ports/interceptors.js';
export {
  optionalInstance,
  optionalPauseReason,
  refuseNul,
  requireHeadersJson,
  requireInt,
  requireOnPending,
  requireStoredTime,
  requireStoredType,
} from './input-checks.js';
export {
  isSqlExecutor,
  isTransactionOpener,
  rowsOfResult,
  type RunOnTransaction,
  type SqlExecutor,
  type SqlValue,
  templateStrings,
  TransactionExecutors,
  type TransactionOpener,
} from './ports/sql-executor.js';
export {
  type KeyLimit,
  type KeyLimitStore,
  type KeyRateLimit,
  type KeyRateLimitStore,
  type KeysWaiting,
  type KeyWaiting,
} from './ports/key-limits.js';
export { keyLimitProblem, keyRateLimitProblem } from './key-limits.js';
export {
  DEPENDENCY_FAILURE_RULES,
  type DependencyFailureRule,
  type DependencyOutcome,
  type DependencyRef,
  type DependencyStore,
  type WaitingCommand,
  type WorkflowEdge,
  type WorkflowMembership,
  type WorkflowStepRecord,
} from './ports/dependencies.js';
export { type KeyWindow, type SubmitWindowStore } from './ports/submit-windows.js';
export {
  batchCounts,
  type BatchCounts,
  planWorkflow,
  requireWorkflowName,
  WorkflowCycleError,
  type WorkflowDependencyPlan,
  type WorkflowStepPlan,
} from './workflow.js';
