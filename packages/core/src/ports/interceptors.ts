import type { ClaimedCommand, CommandHeaders } from '../command.js';

/**
 * Wraps every execution (tracing spans, logging context). Must call `next` exactly once and
 * return (or rethrow) its outcome: the runtime judges success or failure from it.
 */
export type ExecutionInterceptor = (command: ClaimedCommand, next: () => Promise<void>) => Promise<void>;

/**
 * Supplies headers stored with each submitted command, e.g. the submitter's W3C trace context so
 * the execution span can link back to it. Called synchronously inside submit.
 */
export type SubmitHeadersProvider = () => CommandHeaders;
