import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import type { CommandId, NewCommand, WorkflowStepRecord } from '@asynccmd/core';
import type { StoreHarnessFactory } from '../harness.js';
import { newCommand, rejectionCode, submitOne, uniqueType, useArea } from '../support.js';
import { byId, dependenciesOf, submitWaiting } from './dependencies.js';

let workflows = 0;
/** A workflow id no other test uses, with characters a URL or a file name would not take plainly. */
function workflowId(): string {
  workflows += 1;
  return `wf/${workflows} ☃.${Math.random().toString(36).slice(2, 8)}`;
}

export function workflowsArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('workflows', () => {
    const ctx = useArea(factory, adapter, 'wf');
    const cmd = (type: string): NewCommand => newCommand(type, { maxRetry: 0 });

    /** A diamond (charge → reserve, notify → ship) whose ship also waits for a command outside it. */
    async function diamond(type: string, id: string) {
      const store = ctx.store();
      const outside = await submitOne(store, cmd(type));
      const charge = await submitOne(store, cmd(type));
      const reserve = await submitWaiting(store, cmd(type), [charge]);
      const notify = await submitWaiting(store, cmd(type), [{ id: charge, onFailure: 'continue' }]);
      const ship = await submitWaiting(store, cmd(type), [notify, reserve, outside]);
      const steps: WorkflowStepRecord[] = [
        { name: 'charge', id: charge },
        { name: 'reserve', id: reserve },
        { name: 'notify', id: notify },
        { name: 'ship', id: ship },
      ];
      await store.transaction((tx) => dependenciesOf(store).recordWorkflow(tx, id, steps));
      return { outside, charge, reserve, notify, ship, steps };
    }

    it('the steps of a recorded workflow are read back in their order; a rolled-back record leaves none', async () => {
      const store = ctx.store();
      const id = workflowId();
      const { steps } = await diamond(uniqueType('wf'), id);
      expect(await dependenciesOf(store).workflowSteps(id)).toEqual(steps);
      const other = workflowId();
      const a = await submitOne(store, cmd(uniqueType('wf')));
      await expect(
        store.transaction(async (tx) => {
          await dependenciesOf(store).recordWorkflow(tx, other, [{ name: 'a', id: a }]);
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      expect(await dependenciesOf(store).workflowSteps(other)).toEqual([]);
      expect(await dependenciesOf(store).workflowOf(a)).toBeNull();
    });

    it('a workflow id recorded already is INVALID_ARGUMENT, and the first record stays as it was', async () => {
      const store = ctx.store();
      const id = workflowId();
      const { steps } = await diamond(uniqueType('wf'), id);
      const a = await submitOne(store, cmd(uniqueType('wf')));
      expect(
        await rejectionCode(
          store.transaction((tx) => dependenciesOf(store).recordWorkflow(tx, id, [{ name: 'a', id: a }])),
        ),
      ).toBe('INVALID_ARGUMENT');
      expect(await dependenciesOf(store).workflowSteps(id)).toEqual(steps);
    });

    it('workflowOf answers the workflow and step of each step, null for a command of none and an id that does not exist', async () => {
      const store = ctx.store();
      const id = workflowId();
      const { outside, steps } = await diamond(uniqueType('wf'), id);
      for (const s of steps) {
        expect(await dependenciesOf(store).workflowOf(s.id)).toEqual({ workflowId: id, step: s.name });
      }
      expect(await dependenciesOf(store).workflowOf(outside)).toBeNull();
      expect(await dependenciesOf(store).workflowOf('9223372036854775807')).toBeNull();
      expect(await rejectionCode(dependenciesOf(store).workflowOf('x' as CommandId))).toBe('INVALID_ID');
    });

    it('workflowEdges answers every dependency of its steps with its rule, ordered by dependant then dependency', async () => {
      const store = ctx.store();
      const id = workflowId();
      const { outside, charge, reserve, notify, ship } = await diamond(uniqueType('wf'), id);
      const edge = (dependency: CommandId, dependant: CommandId, onFailure = 'cancel') => ({
        dependency,
        dependant,
        onFailure,
      });
      const expected = [
        edge(charge, reserve),
        edge(charge, notify, 'continue'),
        edge(outside, ship),
        edge(reserve, ship),
        edge(notify, ship),
      ].sort((a, b) => byId(a.dependant, b.dependant) || byId(a.dependency, b.dependency));
      expect(await dependenciesOf(store).workflowEdges(id)).toEqual(expected);
      expect(await dependenciesOf(store).workflowEdges(workflowId())).toEqual([]);
    });

    it('a purge takes the edges and workflow steps of the commands it deletes with them', async () => {
      const store = ctx.store();
      const type = uniqueType('wf');
      const id = workflowId();
      const succeed = async (command: CommandId): Promise<void> => {
        const claimed = await store.claimById({
          id: command,
          now: new Date(Date.now() + 1_000),
          token: `wf-purge-${command}`,
          leaseMs: 60_000,
        });
        expect(claimed?.id).toBe(command);
        expect(await store.complete([{ id: command, token: claimed!.claimToken }])).toEqual([command]);
      };
      const first = await submitOne(store, cmd(type));
      const second = await submitWaiting(store, cmd(type), [first]);
      const third = await submitWaiting(store, cmd(type), [second]);
      const steps: WorkflowStepRecord[] = [
        { name: 'first', id: first },
        { name: 'second', id: second },
        { name: 'third', id: third },
      ];
      await store.transaction((tx) => dependenciesOf(store).recordWorkflow(tx, id, steps));
      await succeed(first);
      const cutoff = async () => new Date((await store.now()).getTime() + 60_000);
      expect(await store.purge({ olderThan: await cutoff(), limit: 100, statuses: ['SUCCESS'] })).toBe(1);
      // The purged step and its edge are gone; what still runs keeps its own.
      expect(await dependenciesOf(store).workflowSteps(id)).toEqual(steps.slice(1));
      expect(await dependenciesOf(store).workflowEdges(id)).toEqual([
        { dependency: second, dependant: third, onFailure: 'cancel' },
      ]);
      expect(await dependenciesOf(store).workflowOf(first)).toBeNull();
      await succeed(second);
      await succeed(third);
      expect(await store.purge({ olderThan: await cutoff(), limit: 100, statuses: ['SUCCESS'] })).toBe(2);
      expect(await dependenciesOf(store).workflowSteps(id)).toEqual([]);
      expect(await dependenciesOf(store).workflowEdges(id)).toEqual([]);
      expect(await dependenciesOf(store).workflowOf(third)).toBeNull();
    });

    it('a purge of a cancelled dependant takes its edges: the dependency it waited for keeps running alone', async () => {
      const store = ctx.store();
      const type = uniqueType('wf');
      const id = workflowId();
      const dependency = await submitOne(store, cmd(type));
      const dependant = await submitWaiting(store, cmd(type), [dependency]);
      await store.transaction((tx) =>
        dependenciesOf(store).recordWorkflow(tx, id, [
          { name: 'dependency', id: dependency },
          { name: 'dependant', id: dependant },
        ]),
      );
      expect(E.isRight(await store.cancel(dependant))).toBe(true);
      const cutoff = new Date((await store.now()).getTime() + 60_000);
      expect(await store.purge({ olderThan: cutoff, limit: 100, statuses: ['CANCELLED'] })).toBe(1);
      expect(await dependenciesOf(store).workflowSteps(id)).toEqual([{ name: 'dependency', id: dependency }]);
      expect(await dependenciesOf(store).workflowEdges(id)).toEqual([]);
      expect((await store.get(dependency))?.status).toBe('PENDING');
    });

    it('a bad workflow id is INVALID_ARGUMENT for every read', async () => {
      const store = ctx.store();
      const deps = dependenciesOf(store);
      for (const bad of ['', 'x'.repeat(129), 'nul\u0000', 7 as unknown as string]) {
        expect(await rejectionCode(deps.workflowSteps(bad))).toBe('INVALID_ARGUMENT');
        expect(await rejectionCode(deps.workflowEdges(bad))).toBe('INVALID_ARGUMENT');
      }
    });
  });
}
