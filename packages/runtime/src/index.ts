// The main entry: the runtime, its client and executors, graceful shutdown, retention (a runtime
// option; purgeFinished for one-off use), and the admin HTTP API with health and status resources.
// It loads no DI container, metrics or tracing library and sets no global; those live behind the
// subpaths:
//   @asynccmd/runtime/inversify  asyncCommandModule, AsyncCommandTokens (inversify, reflect-metadata)
//   @asynccmd/runtime/metrics    createMetrics (prom-client)
//   @asynccmd/runtime/tracing    createTraceHeadersProvider, createTracingInterceptor (@opentelemetry/api)
//   @asynccmd/runtime/ops        the views, transitions and input rules the admin API and the CLI share
//   @asynccmd/runtime/test-kit   createInlineRunner, for test kits such as @asynccmd/testing
export { defineExecutor, defineTransactionalExecutor } from './executor.js';
export type {
  AnyExecutor,
  CommandExecutor,
  CommandTypeMap,
  ExecutorDefinition,
  ExecutionContext,
  PayloadMapOf,
  TransactionalContext,
  TransactionalExecutor,
} from './executor.js';
export { createAsyncCommands } from './create-async-commands.js';
export { AsyncCommands } from './async-commands.js';
export type { RuntimeState, RuntimeStatus } from './async-commands.js';
export type { AsyncCommandsOptions, StopOptions } from './options.js';
export type {
  AsyncCommandClient,
  CoalescedSubmitOptions,
  IdempotentSubmitOptions,
  SubmitItem,
  TxSubmit,
} from './client.js';
export type {
  CoalescedOutcome,
  CoalescedSubmit,
  DebounceWindow,
  SubmitWindow,
  ThrottleWindow,
} from './submit-windows.js';
export { MAX_SUBMIT_WINDOW_MS } from './submit-windows.js';
export type { FairShareOptions, KeyLimitOptions, KeyRateLimitOptions } from './key-limits.js';
export type { DependentSubmitOptions, SubmitOptions } from './submit-validation.js';
export type { PoolOptions, PoolState } from './work-pool.js';
export type { CommandEvents } from './command-events.js';
export type { ExecutorRegistry, RegisteredExecutor } from './executor-registry.js';
export type { SchedulerState } from './scheduler.js';
export { installShutdownHandlers } from './shutdown-signals.js';
export type { ShutdownSignalOptions } from './shutdown-signals.js';

export { createAdminHandler } from './ops/admin-handler.js';
export type {
  AdminHandler,
  AdminHandlerOptions,
  AdminHandlerSettings,
  MetricsSource,
} from './ops/admin-handler.js';
export { startAdminServer } from './ops/admin-server.js';
export type { AdminServer, AdminServerOptions } from './ops/admin-server.js';
export type { AdminAuthOptions } from './ops/auth.js';
export type { RequestGuardOptions } from './ops/request-guard.js';
export { checkHealth, publicHealthReport } from './ops/health.js';
export type {
  HealthOptions,
  HealthReason,
  HealthReasonCode,
  HealthReport,
  HealthWarning,
} from './ops/health.js';
export { statusPath } from './ops/status-resource.js';
export { publicStatusPath } from './ops/public-status.js';
export { publicWorkflowStatusPath } from './ops/public-workflow-status.js';
export type { PublicWorkflowStatus, PublicWorkflowStep } from './ops/public-workflow-status.js';
export type {
  PublicStatusHandlerOptions,
  PublicStatusLinkOptions,
  PublicStatusOptions,
} from './ops/public-status.js';
export { purgeFinished } from './services/retention.js';
export type { PurgeOptions, PurgeResult, RetentionOptions } from './services/retention.js';
export type { CleanupWatchOptions } from './services/cleanup-watch.js';
export type { DashboardOptions } from './ops/dashboard/dashboard.js';
export type { RecurringSchedule } from './recurring/recurring-options.js';
export type { CatchUpPolicy } from './recurring/tick-plan.js';
export type { RecurringTick } from './recurring/tick.js';
export { SCHEDULE_HEADER, TICK_HEADER } from './recurring/tick.js';
export type { RecurringSchedules } from './recurring/recurring-control.js';
export type { TypePauses } from './type-pauses.js';
export type { NewScheduleInput, ScheduleView } from './ops/schedules-view.js';
export { cancelWorkflow, workflowStatus, WorkflowBuilder } from './workflow.js';
export type {
  AttemptWorkflow,
  StepDependency,
  SubmittedWorkflow,
  WorkflowProgress,
  WorkflowStatus,
  WorkflowStepDependency,
  WorkflowStepOptions,
  WorkflowStepStatus,
} from './workflow.js';
