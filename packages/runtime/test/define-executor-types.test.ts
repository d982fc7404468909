import { describe, expect, it } from 'vitest';
import { immediateBackoff } from '@asynccmd/core';
import { ExecutorRegistry } from '../src/executor-registry.js';
import { defineExecutor, type ExecutorDefinition } from '../src/executor.js';

const defaults = { leaseMs: 8000, backoff: immediateBackoff, pools: ['emails'] };

// Compiled by tsconfig.tests.json: each @ts-expect-error fails the type check once the line compiles.
describe('defineExecutor types the pool by the mode', () => {
  it('takes a pool beside ASYNC_POOL and IMMEDIATE, and the runtime registers both', () => {
    const pooled = defineExecutor<'mail.send', { to: string }>({
      type: 'mail.send',
      mode: 'ASYNC_POOL',
      pool: 'emails',
      execute: () => undefined,
    });
    const immediate = defineExecutor<'mail.now', { to: string }>({
      type: 'mail.now',
      mode: 'IMMEDIATE',
      pool: 'emails',
      execute: () => undefined,
    });
    const registry = new ExecutorRegistry([pooled, immediate], defaults);
    expect(registry.require('mail.send')).toMatchObject({ mode: 'ASYNC_POOL', pool: 'emails' });
    expect(registry.require('mail.now')).toMatchObject({ mode: 'IMMEDIATE', pool: 'emails' });
  });

  it('refuses a pool without a mode or beside SCHEDULED, as the runtime does', () => {
    const defaulted = defineExecutor<'mail.send', { to: string }>(
      // @ts-expect-error — no mode is SCHEDULED, which runs inline in the poll loop: no pool
      { type: 'mail.send', pool: 'emails', execute: () => undefined },
    );
    const scheduled = defineExecutor<'mail.send', { to: string }>(
      // @ts-expect-error — SCHEDULED takes no pool
      { type: 'mail.send', mode: 'SCHEDULED', pool: 'emails', execute: () => undefined },
    );
    for (const executor of [defaulted, scheduled]) {
      expect(() => new ExecutorRegistry([executor], defaults)).toThrow(/`pool` cannot be set/);
    }
  });

  it('keeps a mode held in a variable typeable when no pool is given', () => {
    const mode = process.env['MODE'] === 'pool' ? ('ASYNC_POOL' as const) : ('SCHEDULED' as const);
    const either: ExecutorDefinition<'a', null> = defineExecutor<'a', null>({
      type: 'a',
      mode,
      execute: () => undefined,
    });
    expect(new ExecutorRegistry([either], defaults).require('a').pool).toBe(
      mode === 'SCHEDULED' ? null : 'shared',
    );
  });
});
