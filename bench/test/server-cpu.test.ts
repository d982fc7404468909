import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseProcStat, treeTicks } from '../src/server-cpu.js';

describe('server CPU from /proc', () => {
  // A postmaster line as proc(5) prints it: comm in parentheses, then fields 3 onwards.
  const postmaster =
    '2197 (postgres) S 1 2197 2197 0 -1 4194560 9000 500000 0 12 130 70 4200 1800 20 0 1 0 1500 229900288 7000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0';

  it('reads pid, parent, own and waited-for children times, start', () => {
    expect(parseProcStat(postmaster)).toEqual({
      pid: 2197,
      comm: 'postgres',
      ppid: 1,
      utime: 130,
      stime: 70,
      cutime: 4200,
      cstime: 1800,
      starttime: 1500,
    });
  });

  it('counts fields from the last parenthesis: a command name may hold spaces and parentheses', () => {
    const odd = postmaster.replace('(postgres)', '(a (b) c)');
    expect(parseProcStat(odd)).toMatchObject({ comm: 'a (b) c', ppid: 1, utime: 130, starttime: 1500 });
  });

  it("parses this process's own stat", () => {
    const self = parseProcStat(readFileSync('/proc/self/stat', 'utf8'));
    expect(self.pid).toBe(process.pid);
    expect(self.ppid).toBe(process.ppid);
  });

  it("sums the parent's own and exited children's time and its live children's own, nobody else's", () => {
    const parent = parseProcStat(postmaster);
    const child = { ...parent, pid: 3000, ppid: 2197, utime: 5, stime: 3, cutime: 99, cstime: 99 };
    const stranger = { ...parent, pid: 4000, ppid: 1, utime: 1000, stime: 1000 };
    expect(treeTicks(parent, [child, stranger])).toBe(130 + 70 + 4200 + 1800 + 5 + 3);
  });

  it('rejects a line that is not a stat line', () => {
    expect(() => parseProcStat('no parentheses here')).toThrow(/not a \/proc/);
  });
});
