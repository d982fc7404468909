/*
 * The adapter kit: what every store adapter needs besides its SQL, its encoding and its
 * connections — the checks of each call's input, the admin-transition loop, the idempotent-insert
 * retry, row shaping and list paging. Pure: the adapters pass in the parts that talk to their
 * database as callbacks.
 */
export * from './input.js';
export * from './guarded-transition.js';
export * from './rows.js';
export * from './schedules.js';
export * from './executor.js';
export * from './type-limits.js';
export * from './type-pauses.js';
