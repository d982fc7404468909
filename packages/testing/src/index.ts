export {
  createTestKit,
  type TestKit,
  DEFAULT_HANG_TIMEOUT_MS,
  DEFAULT_MAX_ROUNDS,
  type DrainOptions,
  type DrainResult,
  type ExpectSubmittedOptions,
  type TestKitOptions,
  type TestKitTypes,
} from './test-kit.js';
export type { AttemptOutcome, AttemptReport } from './attempts.js';
export { TestClock, DEFAULT_TEST_START } from './test-clock.js';
export type { DeepPartial, PayloadMatcher } from './matchers.js';
export { DrainLimitError, TestKitError, type TestKitErrorCode } from './errors.js';
