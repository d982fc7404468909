import { describe, expect, it } from 'vitest';
import { batchCounts, planWorkflow, WorkflowCycleError, LIMITS } from '@asynccmd/core';
import type { WorkflowStepPlan } from '@asynccmd/core';

const step = (name: string, ...deps: string[]): WorkflowStepPlan => ({
  name,
  dependsOn: deps.map((d) => (d.startsWith('#') ? { id: d.slice(1) } : { step: d })),
});

const names = (layers: WorkflowStepPlan[][]): string[][] => layers.map((l) => l.map((s) => s.name));

describe('planWorkflow', () => {
  it('answers the steps in layers, each depending only on earlier ones (and outside commands)', () => {
    const plan = planWorkflow([
      step('ship', 'reserve', 'notify'),
      step('charge', '#42'),
      step('reserve', 'charge'),
      step('notify', 'charge'),
    ]);
    expect(names(plan)).toEqual([['charge'], ['reserve', 'notify'], ['ship']]);
  });

  it('refuses a cycle, naming it, before anything else happens', () => {
    let caught: unknown;
    try {
      planWorkflow([step('a'), step('b', 'a', 'd'), step('c', 'b'), step('d', 'c')]);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(WorkflowCycleError);
    expect(caught).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((caught as WorkflowCycleError).steps).toEqual(['b', 'd', 'c', 'b']);
    expect(() => planWorkflow([step('self', 'self')])).toThrow(WorkflowCycleError);
  });

  it('refuses no steps, too many, a name twice, an unknown step and a dependency named twice', () => {
    const code = (f: () => unknown): unknown => {
      try {
        f();
      } catch (e) {
        return (e as { code?: unknown }).code;
      }
      return 'accepted';
    };
    expect(code(() => planWorkflow([]))).toBe('INVALID_ARGUMENT');
    const many = Array.from({ length: LIMITS.workflowSteps + 1 }, (_, i) => step(`s${i}`));
    expect(code(() => planWorkflow(many))).toBe('INVALID_ARGUMENT');
    expect(code(() => planWorkflow(many.slice(0, LIMITS.workflowSteps)))).toBe('accepted');
    expect(code(() => planWorkflow([step('a'), step('a')]))).toBe('INVALID_ARGUMENT');
    expect(code(() => planWorkflow([step('a', 'missing')]))).toBe('INVALID_ARGUMENT');
    expect(code(() => planWorkflow([step('a'), step('b', 'a', 'a')]))).toBe('INVALID_ARGUMENT');
    expect(code(() => planWorkflow([step('')]))).toBe('INVALID_ARGUMENT');
    const chain = (n: number) =>
      Array.from({ length: n }, (_, i) => (i === 0 ? step('s0') : step(`s${i}`, `s${i - 1}`)));
    expect(code(() => planWorkflow(chain(LIMITS.workflowDepth)))).toBe('accepted');
    expect(code(() => planWorkflow(chain(LIMITS.workflowDepth + 1)))).toBe('INVALID_ARGUMENT');
  });
});

describe('batchCounts', () => {
  it('counts members by how they ended', () => {
    const statuses = ['SUCCESS', 'DEAD', 'SUCCESS', 'CANCELLED', 'RUNNING'];
    expect(batchCounts(statuses.map((status) => ({ status })))).toEqual({
      succeeded: 2,
      dead: 1,
      cancelled: 1,
      unfinished: 1,
    });
  });
});
