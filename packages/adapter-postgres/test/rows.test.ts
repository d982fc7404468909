import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { claimedRecord, toDate, type ClaimedRow } from '../src/rows.js';

/** A time as PostgreSQL prints a timestamptz(3) in a session at `offsetMinutes` from UTC. */
function printed(ms: number, offsetMinutes: number): string {
  const local = new Date(ms + offsetMinutes * 60_000);
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const frac = local.getUTCMilliseconds();
  const fraction = frac === 0 ? '' : `.${pad(frac, 3).replace(/0+$/, '')}`;
  const abs = Math.abs(offsetMinutes);
  const offset =
    `${offsetMinutes < 0 ? '-' : '+'}${pad(Math.floor(abs / 60))}` +
    (abs % 60 === 0 ? '' : `:${pad(abs % 60)}`);
  return (
    `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())} ` +
    `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}${fraction}${offset}`
  );
}

describe('toDate', () => {
  it('reads every timestamptz form PostgreSQL prints, whole-hour and other offsets alike', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(9999, 0, 1) }),
        fc.constantFrom(0, 60, -300, 330, 345, -570, 840, -720),
        (ms, offset) => {
          expect(toDate(printed(ms, offset)).getTime()).toBe(ms);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('keeps milliseconds of longer fractions and refuses what is no timestamp', () => {
    expect(toDate('2026-11-30 05:31:11.123456+00').toISOString()).toBe('2026-11-30T05:31:11.123Z');
    expect(toDate('2026-11-30 05:31:11.5-02').toISOString()).toBe('2026-11-30T07:31:11.500Z');
    expect(toDate('2026-11-30 05:31:11+05:30').toISOString()).toBe('2026-11-30T00:01:11.000Z');
    expect(() => toDate('yesterday at noon')).toThrow(/unreadable timestamp/);
  });
});

describe('claimedRecord', () => {
  it("puts the claim's values back without writing into the driver's row", () => {
    const row: ClaimedRow = Object.freeze({
      id: '42',
      type: 't',
      biz_key: null,
      payload: '{"n":1}',
      max_retry: '3',
      retry_count: '0',
      rescue_count: '0',
      next_run_at: '2026-12-01 10:00:00+00',
      last_error: null,
      owner: null,
      lease_until: '2026-12-01 10:00:31+00',
      idempotent: 'f',
      headers: '{}',
      created_at: '2026-12-01 09:59:00+00',
      started_at: '2026-12-01 10:00:01+00',
      finished_at: null,
      retry_count_at_retry: '0',
      rescue_count_at_retry: '0',
      history: null,
      priority: '0',
      ordering_key: null,
    });
    // Frozen: a record completed in place would throw here (ES modules are strict).
    const record = claimedRecord(row, 'tok', 'worker-1');
    expect(record).toMatchObject({ id: '42', status: 'RUNNING', claimToken: 'tok', claimedBy: 'worker-1' });
    expect(record.updatedAt).toEqual(record.startedAt);
    expect(Object.keys(row)).toHaveLength(21);
  });
});
