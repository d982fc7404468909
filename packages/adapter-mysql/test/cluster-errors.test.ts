import { describe, expect, it } from 'vitest';
import { LostRaceError, retryLockConflicts } from '../src/connection.js';
import { admin } from './databases.js';

/**
 * The errors a Galera cluster answers when a write lost a race or the node is in a cluster change,
 * raised by the real server (SIGNAL with the errno Galera uses), and how the store's retry treats
 * them: retried, bounded, and anything else passed through at once.
 */
describe('Galera errors are lost races or cluster changes, retried a bounded number of times', () => {
  /** Runs `fn` with a statement that fails with `errno` the first `failures` times, then succeeds. */
  async function failing(errno: number, failures: number): Promise<{ tries: number; result: unknown }> {
    let tries = 0;
    const result = await admin((c) =>
      retryLockConflicts(async () => {
        tries++;
        if (tries <= failures) {
          await c.query(`SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = ${errno}, MESSAGE_TEXT = 'galera'`);
        }
        const [rows] = await c.query('SELECT 1 AS one');
        return rows;
      }),
    );
    return { tries, result };
  }

  it.each([
    [1213, 'certification failure / brute-force abort'],
    [1047, 'WSREP has not yet prepared node for application use'],
    [1180, 'error during COMMIT (cluster change)'],
  ])('%i (%s) is retried until it passes', async (errno) => {
    const { tries, result } = await failing(errno, 3);
    expect(tries).toBe(4);
    expect(result).toEqual([{ one: 1 }]);
  });

  it('a cluster change that persists reaches the caller after a bounded number of tries', async () => {
    let tries = 0;
    const error = await admin((c) =>
      retryLockConflicts(async () => {
        tries++;
        await c.query("SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1047, MESSAGE_TEXT = 'not ready'");
      }).catch((e: unknown) => e),
    );
    expect((error as { errno?: number }).errno).toBe(1047);
    expect(tries).toBe(8);
  });

  it('a lost race the server did not report (fewer rows moved than locked) is retried too', async () => {
    let tries = 0;
    const result = await retryLockConflicts(async () => {
      if (++tries < 3) throw new LostRaceError('claim');
      return 'claimed';
    });
    expect({ tries, result }).toEqual({ tries: 3, result: 'claimed' });
  });

  it('any other error is not retried', async () => {
    let tries = 0;
    const error = await admin((c) =>
      retryLockConflicts(async () => {
        tries++;
        await c.query("SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, MESSAGE_TEXT = 'duplicate'");
      }).catch((e: unknown) => e),
    );
    expect((error as { errno?: number }).errno).toBe(1062);
    expect(tries).toBe(1);
  });
});
