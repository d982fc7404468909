// The main entry: the runtime, its client and executors, graceful shutdown, retention (a runtime
// option; purgeFinished for one-off use), and the admin HTTP API with health and status resources.
// It loads no DI container, metrics or tracing library and sets no global; those live behind the
// subpaths:
//   @asynccmd/runtime/inversify  asyncCommandModule, AsyncCommandTokens (inversify, reflect-metadata)
//   @asynccmd/runtime/metrics    createMetrics (prom-client)
//   @asynccmd/runtime/tracing    createTraceHeadersProvider, createTracingInterceptor (@opentelemetry/api)
//   @asynccmd/runtime/ops        the views, transitions and input rules the admin API and the CLI share
//   @asynccmd/runtime/test-kit   createInlineRunner, for test kits such as @asynccmd/testing
export { defineExecutor } from './executor.js';
export type {
  AnyExecutor,
  CommandExecutor,
  CommandTypeMap,
  ExecutionContext,
  PayloadMapOf,
} from './executor.js';
export { createAsyncCommands } from './create-async-commands.js';
export { AsyncCommands } from './async-commands.js';
export type { RuntimeState, RuntimeStatus } from './async-commands.js';
export type { AsyncCommandsOptions, StopOptions } from './options.js';
export type { AsyncCommandClient, IdempotentSubmitOptions, SubmitItem, TxSubmit } from './client.js';
export type { SubmitOptions } from './submit-validation.js';
export type { PoolOptions, PoolState } from './work-pool.js';
export type { PoolSet } from './pool-set.js';
export type { CommandEvents } from './command-events.js';
export type { ExecutorRegistry, RegisteredExecutor } from './executor-registry.js';
export type { Scheduler, SchedulerState } from './scheduler.js';
export type { LeaseKeeper } from './services/lease-keeper.js';
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
export type { HealthOptions, HealthReason, HealthReasonCode, HealthReport } from './ops/health.js';
export { statusPath } from './ops/status-resource.js';
export { publicStatusPath } from './ops/public-status.js';
export type {
  PublicStatusHandlerOptions,
  PublicStatusLinkOptions,
  PublicStatusOptions,
} from './ops/public-status.js';
export { purgeFinished } from './services/retention.js';
export type { PurgeOptions, PurgeResult, RetentionOptions } from './services/retention.js';
export type { DashboardOptions } from './ops/dashboard/dashboard.js';
export type { RecurringSchedule } from './recurring/recurring-options.js';
export type { CatchUpPolicy } from './recurring/tick-plan.js';
export type { RecurringTick } from './recurring/tick.js';
export { SCHEDULE_HEADER, TICK_HEADER } from './recurring/tick.js';
export type { RecurringSchedules } from './recurring/recurring-control.js';
export { PAUSED_TYPES_REFRESH_MS } from './type-pauses.js';
export type { TypePauses } from './type-pauses.js';
export type { NewScheduleInput, ScheduleView } from './ops/schedules-view.js';
export { RUN_TIME_SCHEDULES_REFRESH_MS } from './recurring/recurring-service.js';
