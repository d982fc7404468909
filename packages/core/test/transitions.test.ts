import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import {
  cancel,
  claim,
  decideFailure,
  exponentialBackoff,
  fail,
  heartbeat,
  kill,
  reclaim,
  release,
  requeue,
  retry,
  succeed,
  type CommandState,
} from '../src/index.js';
import { checkTransition } from '../src/transitions.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const pending: CommandState = {
  status: 'PENDING',
  maxRetry: 2,
  retryCount: 0,
  rescueCount: 0,
  retryCountAtRetry: 0,
  rescueCountAtRetry: 0,
  claimToken: null,
  nextRunAt: t0,
  lastError: null,
};
const backoff = exponentialBackoff();

function right(r: E.Either<unknown, CommandState>): CommandState {
  if (E.isLeft(r)) throw new Error(`expected Right, got ${String(r.left)}`);
  return r.right;
}
function leftCode(r: E.Either<{ code: string; message: string }, unknown>): string {
  if (E.isRight(r)) throw new Error('expected Left');
  return r.left.code;
}

describe('state machine', () => {
  it('runs the happy path PENDING → RUNNING → SUCCESS', () => {
    const running = right(claim(pending, 'tok'));
    expect(running).toMatchObject({ status: 'RUNNING', claimToken: 'tok' });
    expect(right(succeed(running, 'tok'))).toMatchObject({ status: 'SUCCESS', claimToken: null });
  });

  it('retries with backoff, then dead-letters when retries are exhausted', () => {
    let s = right(claim(pending, 'a'));
    s = right(fail(s, 'a', new Error('boom'), t0, backoff));
    expect(s).toMatchObject({ status: 'PENDING', retryCount: 1, lastError: 'boom' });
    expect(s.nextRunAt.getTime() - t0.getTime()).toBe(60_000);
    s = right(fail(right(claim(s, 'b')), 'b', new Error('boom'), t0, backoff));
    expect(s.nextRunAt.getTime() - t0.getTime()).toBe(120_000);
    s = right(fail(right(claim(s, 'c')), 'c', new TypeError('bad'), t0, backoff));
    expect(s).toMatchObject({ status: 'DEAD', retryCount: 3, lastError: 'TypeError: bad' });
  });

  it('a max retry of 0 dead-letters the first failure', () => {
    expect(decideFailure({ maxRetry: 0, retryCount: 0, retryCountAtRetry: 0 }, 'x', t0, backoff).status).toBe(
      'DEAD',
    );
  });

  it('success clears the last error: it stays in the history, not on the command', () => {
    const failed = right(fail(right(claim(pending, 'a')), 'a', new Error('flaky'), t0, backoff));
    expect(failed.lastError).toBe('flaky');
    expect(right(succeed(right(claim(failed, 'b')), 'b')).lastError).toBeNull();
  });

  it('fences outcomes with the claim token', () => {
    const running = right(claim(pending, 'mine'));
    expect(leftCode(succeed(running, 'theirs'))).toBe('STALE_CLAIM');
    expect(leftCode(fail(running, 'theirs', 'e', t0, backoff))).toBe('STALE_CLAIM');
    expect(leftCode(heartbeat(running, 'theirs'))).toBe('STALE_CLAIM');
    expect(leftCode(release(running, 'theirs'))).toBe('STALE_CLAIM');
  });

  it('refuses illegal transitions with a readable reason', () => {
    const r = succeed(pending, 'tok');
    expect(E.isLeft(r) && r.left.message).toBe(
      'cannot succeed command: it is PENDING (succeed is allowed only from RUNNING)',
    );
    expect(leftCode(retry(pending, t0))).toBe('ILLEGAL_TRANSITION');
    expect(leftCode(requeue(pending, t0))).toBe('ILLEGAL_TRANSITION');
    expect(leftCode(cancel(right(claim(pending, 't')), 'too late'))).toBe('ILLEGAL_TRANSITION');
    const done = right(succeed(right(claim(pending, 't')), 't'));
    expect(leftCode(kill(done))).toBe('ILLEGAL_TRANSITION');
    expect(leftCode(claim(done, 'x'))).toBe('ILLEGAL_TRANSITION');
    const msg = checkTransition('kill', 'SUCCESS', '42');
    expect(E.isLeft(msg) && msg.left.message).toBe(
      'cannot kill command 42: it is SUCCESS (kill is allowed only from WAITING or PENDING or RUNNING or DEAD)',
    );
  });

  it('reclaims a hung command and dead-letters it past the rescue limit', () => {
    let s = right(claim(pending, 't1'));
    s = right(reclaim(s, 1));
    expect(s).toMatchObject({
      status: 'PENDING',
      rescueCount: 1,
      claimToken: null,
      nextRunAt: pending.nextRunAt,
    });
    s = right(reclaim(right(claim(s, 't2')), 1));
    expect(s.status).toBe('DEAD');
    expect(s.lastError).toMatch(/lease expired more than 1 times/);
  });

  it('admin retry gives a dead letter fresh attempts and keeps its counts; kill and cancel dispose', () => {
    const dead: CommandState = { ...pending, status: 'DEAD', retryCount: 3, rescueCount: 2 };
    const retried = right(retry(dead, t0));
    expect(retried).toMatchObject({
      status: 'PENDING',
      retryCount: 3,
      rescueCount: 2,
      retryCountAtRetry: 3,
      rescueCountAtRetry: 2,
    });
    // The budget starts again: maxRetry (2) more retries, backed off from the first step again.
    const first = decideFailure(retried, 'x', t0, backoff);
    expect(first).toMatchObject({ status: 'PENDING', retryCount: 4 });
    expect(first.nextRunAt.getTime() - t0.getTime()).toBe(backoff.delayMs(0));
    expect(decideFailure({ ...retried, retryCount: 5 }, 'x', t0, backoff).status).toBe('DEAD');
    // And the rescue limit: one more rescue than before the retry is still within a limit of 1.
    expect(right(reclaim(right(claim(retried, 'r')), 1)).status).toBe('PENDING');
    expect(right(kill(dead, 'not needed'))).toMatchObject({ status: 'CANCELLED', lastError: 'not needed' });
    expect(right(cancel(pending))).toMatchObject({ status: 'CANCELLED' });
    expect(right(requeue(right(claim(pending, 't')), t0))).toMatchObject({
      status: 'PENDING',
      claimToken: null,
    });
  });
});
