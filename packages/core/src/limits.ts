/*
 * Every limit on what asynccmd accepts, in one place. A store's text limits are the widths of the
 * narrowest column of the three databases (MySQL's VARCHARs; PostgreSQL and SQLite keep TEXT), so
 * a command one store accepts every store accepts. A submit (the runtime's client and PostgreSQL's
 * SQL submit functions, whose text is fixed in applied migrations) holds some of them tighter.
 */
export const LIMITS = {
  /** The largest 32-bit signed integer: the widest integer column every database holds (counts, retries). */
  intColumn: 2 ** 31 - 1,
  /** Characters of a command type (the `type` columns: VARCHAR(128)). */
  typeChars: 128,
  /** Characters of a bizKey a store keeps (`biz_key`: VARCHAR(255)). */
  bizKeyChars: 255,
  /** Characters of an owner a store keeps (`owner`: VARCHAR(128)). */
  ownerChars: 128,
  /** Characters of a claim token (`claim_token`: VARCHAR(128)). */
  tokenChars: 128,
  /** Characters of a claiming instance's name (`claimed_by`: VARCHAR(128)). */
  instanceChars: 128,
  /** Characters of an ordering key (`ordering_key`: VARCHAR(128)). */
  orderingKeyChars: 128,
  /** Characters of a schedule name (`name` of the schedules table: VARCHAR(128)). */
  scheduleNameChars: 128,
  /** Characters of a cron expression or a time zone name (VARCHAR(200)). */
  cronChars: 200,
  /** Characters of a type pause's reason. */
  pauseReasonChars: 1_000,
  /** The most RUNNING commands a type limit allows. */
  typeLimit: 100_000,
  /** Rows of a list page at most. */
  listRows: 1_000,
  /** The largest `deadLetterLimit` of a health probe. */
  healthProbeDeadLetters: 100_000,
  /** Latency bounds of an outcome count at most. */
  outcomeLatencyBounds: 64,
  /** Characters of lastError kept: a 500-character column with room to spare for multibyte text. */
  lastErrorChars: 480,
  /** UTF-8 bytes of a payload's JSON when the store's `maxPayloadBytes` is not given. */
  defaultPayloadBytes: 64 * 1024,
  /** Nesting of arrays and objects in a payload (`{}` is 1, `{"a":[]}` is 2). */
  payloadDepth: 64,
  /** UTF-8 bytes of an executor result's JSON a store keeps at most. */
  resultBytes: 1024 * 1024,
  /** UTF-8 bytes of a result when the runtime's `maxResultBytes` is not given. */
  defaultResultBytes: 64 * 1024,
  /** A command's headers: how many, their names' and values' characters, their JSON's UTF-8 bytes. */
  headers: { count: 64, nameLength: 128, valueLength: 8192, totalBytes: 16 * 1024 },
  /** A rate limit's most starts per period. */
  rateLimitStarts: 1_000_000,
  /** A rate limit's longest period, in milliseconds (a week). */
  ratePeriodMs: 7 * 24 * 60 * 60 * 1000,
  /** The most tokens one rate-limit take asks for, or one give-back returns. */
  rateTake: 100_000,
  /** Characters of a submit's bizKey (tighter than the column: the SQL submit functions hold to it). */
  submitBizKeyChars: 128,
  /** Characters of a submit's owner (as submitBizKeyChars). */
  submitOwnerChars: 64,
  /** Retries a submit may give a command. */
  submitMaxRetry: 1_000,
  /** The most running commands a limit per key allows. */
  keyLimit: 100_000,
  /** Characters of a key a rate limit per key keeps (longer ones are cut to it). */
  rateKeyChars: 512,
  /** A key's largest weight in a weighted fair share (commands it takes per turn). */
  keyWeight: 1_000,
  /** Keys with a weight, per type, at most. */
  weightedKeys: 10_000,
  /** The keys one type's keys-waiting answer names at most (KeyLimitStore.keysWaiting's `top`). */
  keysWaitingTop: 100,
  /** The due commands of one key a keys-waiting answer counts at most (one more says "more"). */
  keyDueCounted: 1_000,
  /** Dependencies of one command. */
  dependencies: 10_000,
  /** Steps of one workflow. */
  workflowSteps: 10_000,
  /** Steps of a workflow's longest chain: what PostgreSQL's stack and SQLite's trigger depth let a cascade through. */
  workflowDepth: 100,
  /** Characters of a workflow's id. */
  workflowIdChars: 128,
  /** The largest `done` or `total` of a progress report: what a JavaScript number holds exactly. */
  progress: Number.MAX_SAFE_INTEGER,
} as const;
