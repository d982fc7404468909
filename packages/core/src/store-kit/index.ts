/*
 * The adapter kit: what every store adapter needs besides its SQL, its encoding and its
 * connections — the checked store in front of its engine (checked-store.ts), the checks of each call's input, the admin-transition loop, the idempotent-insert
 * retry, row shaping and list paging. Pure: the adapters pass in the parts that talk to their
 * database as callbacks.
 */
export * from './input.js';
export * from './checked-store.js';
export * from './migrations.js';
export * from './guarded-transition.js';
export * from './rows.js';
export * from './schedules.js';
export * from './executor.js';
export * from './type-limits.js';
export * from './rate-limits.js';
export * from './type-pauses.js';
export * from './key-limits.js';
export * from './key-rate-limits.js';
export * from './keyed-reads.js';
export * from './dependencies.js';
export * from './history.js';
export * from './history-partitions.js';
export * from './head-skip.js';
export * from './submit-windows.js';
// Core's own pieces that only adapters use.
export { ATTEMPT_HISTORY_LENGTH } from '../command.js';
export { validateIdentifier } from '../identifier.js';
export { wakeProbeDelayMs } from '../wake-probe.js';
export { checkTransition, rescueLimitMessage, TRANSITION_SOURCES } from '../transitions.js';
export { refillRateBucket, refundToRateBucket, takeFromRateBucket } from '../rate-limits.js';
export { KEY_FIELD_PATTERN } from '../ports/key-limits.js';
export { type ListPosition } from '../input-checks.js';
