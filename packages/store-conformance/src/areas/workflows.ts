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
