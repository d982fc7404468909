import { ACTIVE_STATUSES, DEFAULT_PRIORITY, LIMITS, PRIORITY_RANGE } from '@asynccmd/core';
import { IDEMPOTENT_INSERT_ATTEMPTS } from '@asynccmd/core/store-kit';
import { flowKeyOf } from './flow-keys.js';
import type { TableNames } from './names.js';

/*
 * The submit of SQL: functions next to the command table, so a trigger, psql or a program in any
 * language submits inside whatever transaction it is in. They check what the runtime's submit
 * checks where SQL can (the type's registration it cannot: a type no process runs stays PENDING,
 * as one submitted by another service does), write the row the store's insert writes, and NOTIFY
 * the store's channel, which PostgreSQL delivers at COMMIT and drops at ROLLBACK.
 *
 * Every refusal is raised with a message starting `asynccmd: <CODE>:` (the code of the error the
 * client would throw) and the SQLSTATE in SUBMIT_SQLSTATES.
 */

/** Limits of the runtime's submit (runtime submit-validation), which the SQL submit holds to too. */
const MAX_BIZ_KEY_CHARS = LIMITS.submitBizKeyChars;
const MAX_OWNER_CHARS = LIMITS.submitOwnerChars;
const MAX_RETRY_LIMIT = LIMITS.submitMaxRetry;
const DEFAULT_MAX_RETRY = 5;

/** The SQLSTATE each refusal is raised with. */
export const SUBMIT_SQLSTATES = {
  INVALID_ARGUMENT: '22023', // invalid_parameter_value
  PAYLOAD_NOT_SERIALISABLE: '22023',
  PAYLOAD_TOO_LARGE: '54000', // program_limit_exceeded
  STORE_CONTENTION: '40001', // serialization_failure: retry the transaction
} as const;

type Refusal = keyof typeof SUBMIT_SQLSTATES;

const NOW = `date_trunc('milliseconds', now())`;
const EARLIEST = `'1000-01-01 00:00:00+00'::timestamptz`;
const LATEST = `'9999-12-31 23:59:59.999+00'::timestamptz`;
const active = (alias: string): string =>
  `${alias}status IN (${ACTIVE_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/** A plpgsql RAISE of `code` with `message` (plpgsql format text, `%` for each of `args`). */
const refuse = (code: Refusal, message: string, ...args: string[]): string =>
  `RAISE EXCEPTION 'asynccmd: ${code}: ${message}'${args.map((a) => `, ${a}`).join('')}
       USING ERRCODE = '${SUBMIT_SQLSTATES[code]}'`;

/** The function (no arguments) answering the largest payload the submit functions accept, in bytes. */
export function payloadLimitFunction(n: TableNames, maxPayloadBytes: number): string {
  if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 1) {
    throw new RangeError('maxPayloadBytes must be a positive integer');
  }
  return `CREATE OR REPLACE FUNCTION ${n.fn('payload_limit')}() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT ${maxPayloadBytes} $$`;
}

/**
 * The checks both submit functions run on their arguments, the common ones ($1 type, $2 payload,
 * $3 run_at, $5 max_retry, $6 owner; the biz key, $4, each checks its own way), and the due time
 * `due` as the column keeps it (milliseconds).
 */
function checks(n: TableNames): string {
  return `
    IF $1 IS NULL OR $1 = '' THEN
      ${refuse('INVALID_ARGUMENT', 'a command needs a type')};
    END IF;
    IF $2 IS NULL THEN
      ${refuse('INVALID_ARGUMENT', 'a command needs a payload: JSON, not SQL NULL')};
    END IF;
    payload_text := $2::text;
    payload_bytes := octet_length(payload_text);
    IF payload_bytes > ${n.fn('payload_limit')}() THEN
      ${refuse('PAYLOAD_TOO_LARGE', 'payload is % bytes as JSON, over the limit of % bytes', 'payload_bytes', `${n.fn('payload_limit')}()`)};
    END IF;
    -- Nesting deeper than ${LIMITS.payloadDepth} needs more than ${LIMITS.payloadDepth} brackets: only then are they walked.
    IF payload_bytes - octet_length(translate(payload_text, '[{', '')) > ${LIMITS.payloadDepth} THEN
      depth := 0;
      -- The brackets outside strings, in order.
      FOREACH bracket IN ARRAY regexp_split_to_array(
          regexp_replace(regexp_replace(payload_text, '"(\\\\.|[^"\\\\])*"', '', 'g'), '[^][{}]', '', 'g'), '') LOOP
        depth := depth + CASE WHEN bracket IN ('[', '{') THEN 1 ELSE -1 END;
        IF depth > ${LIMITS.payloadDepth} THEN
          ${refuse('PAYLOAD_NOT_SERIALISABLE', `payload is nested deeper than ${LIMITS.payloadDepth} levels of arrays and objects`)};
        END IF;
      END LOOP;
    END IF;
    due := $3::timestamptz(3);
    IF due IS NOT NULL AND NOT (due >= ${EARLIEST} AND due <= ${LATEST}) THEN
      ${refuse('INVALID_ARGUMENT', 'run_at must be from 1000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z, not %', '$3')};
    END IF;
    IF $5 IS NULL OR $5 < 0 OR $5 > ${MAX_RETRY_LIMIT} THEN
      ${refuse('INVALID_ARGUMENT', `max_retry must be an integer from 0 to ${MAX_RETRY_LIMIT}, not %`, `coalesce($5::text, 'null')`)};
    END IF;
    IF $6 IS NOT NULL AND ($6 = '' OR char_length($6) > ${MAX_OWNER_CHARS}) THEN
      ${refuse('INVALID_ARGUMENT', `owner must be a non-empty string of at most ${MAX_OWNER_CHARS} characters`)};
    END IF;
    IF $4 IS NOT NULL AND char_length($4) > ${MAX_BIZ_KEY_CHARS} THEN
      ${refuse('INVALID_ARGUMENT', `biz_key must be a non-empty string of at most ${MAX_BIZ_KEY_CHARS} characters`)};
    END IF;`;
}

const DECLARE = `
    payload_text text;
    payload_bytes integer;
    depth integer;
    bracket text;
    due timestamptz(3);`;

/** Wakes the store's listeners at COMMIT, as the store's own submits do, when the command is due now. */
const wake = (n: TableNames): string => `
    IF due IS NULL OR due <= now() THEN
      PERFORM pg_notify('${n.channel}', '');
    END IF;`;

const ARGUMENTS_V6 = `type text, payload json, run_at timestamptz DEFAULT NULL, biz_key text DEFAULT NULL,
  max_retry integer DEFAULT ${DEFAULT_MAX_RETRY}, owner text DEFAULT NULL`;
/**
 * Version 8 adds the priority and the ordering key last, with defaults: calls written for version 6
 * keep working.
 */
const ARGUMENTS_V8 = `${ARGUMENTS_V6}, priority integer DEFAULT ${DEFAULT_PRIORITY}, ordering_key text DEFAULT NULL`;

/**
 * The checks of version 8 ($7 priority, $8 ordering key), then the key's lock, taken before the
 * insert draws the id and held to the end of the transaction, as the store's keyed inserts do.
 */
const priorityAndKey = (n: TableNames): string => `
    IF $7 IS NULL OR $7 < ${PRIORITY_RANGE.min} OR $7 > ${PRIORITY_RANGE.max} THEN
      ${refuse('INVALID_ARGUMENT', `priority must be an integer from ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}, not %`, `coalesce($7::text, 'null')`)};
    END IF;
    IF $8 IS NOT NULL THEN
      IF $8 = '' OR char_length($8) > ${LIMITS.orderingKeyChars} THEN
        ${refuse('INVALID_ARGUMENT', `ordering_key must be a non-empty string of at most ${LIMITS.orderingKeyChars} characters`)};
      END IF;
      PERFORM pg_advisory_xact_lock(hashtext('${n.table.replace(/'/g, "''")}'), hashtext($8));
    END IF;`;

/**
 * Version 12 adds `on_pending` last, with a default: calls written for versions 6 and 8 keep
 * working, and keep the holder as they did.
 */
const ARGUMENTS_V12 = `${ARGUMENTS_V8}, on_pending text DEFAULT 'keep'`;
const V6_SIGNATURE = 'text, json, timestamptz, text, integer, text';
const V8_SIGNATURE = `${V6_SIGNATURE}, integer, text`;

/**
 * The INSERT both functions write (of version 8 and later: with the priority and the ordering key;
 * of version 20, `flowKeys`, with the command's flow key as the store's inserts write it).
 */
const insert = (n: TableNames, v8: boolean, idempotent: boolean, flowKeys = false): string => `
      INSERT INTO ${n.table} (type, biz_key, payload, max_retry, next_run_at, owner, idempotent, created_at, updated_at${v8 ? ', priority, ordering_key' : ''}${flowKeys ? ', flow_key' : ''})
      VALUES ($1, $4, $2, $5, COALESCE(due, ${NOW}), $6, ${idempotent ? 'TRUE' : 'FALSE'}, ${NOW}, ${NOW}${v8 ? ', $7, $8' : ''}${flowKeys ? `, ${flowKeyOf(n, '$1', '$2')}` : ''})`;

/**
 * The statements creating the submit functions (their limit function must exist): as migration 6
 * made them (`version` 6), or with the priority argument of migration 8, which first drops the
 * functions of version 6 (a longer argument list would be a second function beside them, and
 * calls with six arguments would match both).
 */
export function submitFunctions(n: TableNames, version: 6 | 8, flowKeys = false): string[] {
  const v8 = version === 8;
  const ARGUMENTS = v8 ? ARGUMENTS_V8 : ARGUMENTS_V6;
  return [
    ...(v8 && !flowKeys
      ? [
          `DROP FUNCTION IF EXISTS ${n.fn('submit')}(${V6_SIGNATURE})`,
          `DROP FUNCTION IF EXISTS ${n.fn('submit_once')}(${V6_SIGNATURE})`,
        ]
      : []),
    `CREATE OR REPLACE FUNCTION ${n.fn('submit')}(${ARGUMENTS}) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    #variable_conflict use_column
    DECLARE ${DECLARE}
      submitted bigint;
    BEGIN
      ${checks(n)}${v8 ? priorityAndKey(n) : ''}
      IF $4 = '' THEN
        ${refuse('INVALID_ARGUMENT', `biz_key must be a non-empty string of at most ${MAX_BIZ_KEY_CHARS} characters`)};
      END IF;
      ${insert(n, v8, false, flowKeys)}
      RETURNING id INTO submitted;
      ${wake(n)}
      RETURN submitted;
    END $fn$`,
    ...(flowKeys ? [] : [submitOnce(n, version)]),
  ];
}

/**
 * The statements of migration 12: submit_once with `on_pending` and the `replaced` column. The
 * function of version 8 is dropped first: a longer argument list would be a second function beside
 * it (and calls with eight arguments or fewer would match both), and CREATE OR REPLACE cannot
 * change the columns a function returns.
 */
export function replacingSubmitOnce(n: TableNames, flowKeys = false): string[] {
  return [`DROP FUNCTION IF EXISTS ${n.fn('submit_once')}(${V8_SIGNATURE})`, submitOnce(n, 12, flowKeys)];
}

/**
 * Version 12's replace ($9 on_pending), when the insert yielded to an unfinished holder: an UPDATE
 * of it `WHERE status = 'PENDING'` writes this submit's contents, as the store's replacing
 * idempotent insert does. The row's lock decides between concurrent writers: a submit replacing
 * it meanwhile is waited for and then replaced in turn, and a claim taking it meanwhile is waited
 * for and then, RUNNING, leaves it alone (the look-up after reads it, replaced false). Status,
 * counters, owner, ordering key, id and history stay; headers become `{}`, as this submit's own
 * would be.
 */
const replaceHolder = (n: TableNames, flowKeys: boolean): string => `
        IF $9 <> 'keep' THEN
          UPDATE ${n.table} AS c SET payload = $2, max_retry = $5, headers = '{}', priority = $7,
              updated_at = ${NOW},${flowKeys ? ` flow_key = ${flowKeyOf(n, '$1', '$2')},` : ''}
              next_run_at = CASE WHEN $9 = 'replace' THEN COALESCE(due, ${NOW}) ELSE c.next_run_at END
            WHERE c.type = $1 AND c.biz_key = $4 AND c.idempotent AND c.status = 'PENDING'
            RETURNING c.id, c.next_run_at INTO id, due;
          IF id IS NOT NULL THEN
            duplicate := TRUE;
            replaced := TRUE;
            -- Replaced, it may be due sooner than before: announced as a new one would be.
            ${wake(n)}
            RETURN;
          END IF;
        END IF;`;

/** At most one unfinished idempotent command per (type, biz_key): on a duplicate, the holder's id. */
function submitOnce(n: TableNames, version: 6 | 8 | 12, flowKeys = false): string {
  const v8 = version !== 6;
  const v12 = version === 12;
  const ARGUMENTS = v12 ? ARGUMENTS_V12 : v8 ? ARGUMENTS_V8 : ARGUMENTS_V6;
  const notReplaced = v12 ? `\n          replaced := FALSE;` : '';
  const onPending = v12
    ? `
      IF $9 IS NULL OR $9 NOT IN ('keep', 'replace', 'replace-keep-run-at') THEN
        ${refuse('INVALID_ARGUMENT', `on_pending must be ''keep'', ''replace'' or ''replace-keep-run-at'', not %`, `coalesce(quote_literal($9), 'null')`)};
      END IF;`
    : '';
  return `CREATE OR REPLACE FUNCTION ${n.fn('submit_once')}(${ARGUMENTS}, OUT id bigint, OUT duplicate boolean${v12 ? ', OUT replaced boolean' : ''})
    LANGUAGE plpgsql VOLATILE AS $fn$
    -- The arguments are read as $n: a bare name in a statement is the table's column.
    #variable_conflict use_column
    DECLARE ${DECLARE}
    BEGIN
      ${checks(n)}${onPending}${v8 ? priorityAndKey(n) : ''}
      IF $4 IS NULL OR $4 = '' THEN
        ${refuse('INVALID_ARGUMENT', 'an idempotent submit needs a non-empty biz_key')};
      END IF;
      -- Each statement sees the commits before it (READ COMMITTED): a holder that finished between the
      -- insert and the look-up is gone from both, and the next round inserts.
      FOR attempt IN 1..${IDEMPOTENT_INSERT_ATTEMPTS} LOOP
        ${insert(n, v8, true, flowKeys)}
        ON CONFLICT (type, biz_key) WHERE idempotent AND ${active('')} DO NOTHING
        RETURNING ${n.table}.id INTO id;
        IF id IS NOT NULL THEN
          duplicate := FALSE;${notReplaced}
          ${wake(n)}
          RETURN;
        END IF;${v12 ? replaceHolder(n, flowKeys) : ''}
        SELECT c.id INTO id FROM ${n.table} AS c
          WHERE c.type = $1 AND c.biz_key = $4 AND c.idempotent AND ${active('c.')} LIMIT 1;
        IF id IS NOT NULL THEN
          duplicate := TRUE;${notReplaced}
          RETURN;
        END IF;
      END LOOP;
      ${refuse('STORE_CONTENTION', 'the holder of (%, %) kept changing while an idempotent submit was applied to it; try again', '$1', '$4')};
    END $fn$`;
}
