import type { CommandStore } from '@asynccmd/core';
import { AsyncCommands } from '@asynccmd/runtime';
import { BENCH_TYPE, type BenchPayload } from '../protocol.js';

/*
 * The workflow drains' backlogs, submitted as an application submits them: through the client's
 * workflow builder (and submitMany), not seeded by SQL. Every command is of the bench type with its
 * own seq, so the drain's exactly-once check covers the workflow's steps like any command.
 */

/** Chains of three per workflow in the graph drain (3,000 steps, within MAX_WORKFLOW_STEPS). */
export const CHAINS_PER_WORKFLOW = 1_000;

type BenchTypes = { readonly [BENCH_TYPE]: BenchPayload };

/** A client that only submits the bench type, on `store` (opened and closed by `open`). */
async function withClient(
  open: () => CommandStore | Promise<CommandStore>,
  fn: (commands: AsyncCommands<BenchTypes, unknown>) => Promise<void>,
): Promise<void> {
  const store = await open();
  try {
    await fn(new AsyncCommands<BenchTypes, unknown>({ store, executors: [], submitOnlyTypes: [BENCH_TYPE] }));
  } finally {
    await store.close();
  }
}

/**
 * Seqs `firstSeq` … `firstSeq + count − 1` as chains of three (a 3-level graph: each step after a
 * chain's first waits for the one before it), CHAINS_PER_WORKFLOW chains a workflow, each workflow
 * submitted in a transaction of its own.
 */
export async function submitWorkflowGraph(
  open: () => CommandStore | Promise<CommandStore>,
  firstSeq: number,
  count: number,
): Promise<void> {
  await withClient(open, async (commands) => {
    const end = firstSeq + count;
    for (let seq = firstSeq, n = 0; seq < end; n++) {
      const workflow = commands.client.workflow(`bench-graph-${n}`);
      for (let chain = 0; chain < CHAINS_PER_WORKFLOW && seq < end; chain++) {
        let before: string | undefined;
        for (let level = 0; level < 3 && seq < end; level++, seq++) {
          const name = `${chain}.${level}`;
          workflow.step(name, BENCH_TYPE, { seq }, before === undefined ? {} : { dependsOn: [before] });
          before = name;
        }
      }
      await workflow.submit();
    }
  });
}

/**
 * Seqs `firstSeq` … `firstSeq + count − 1` as one batch: count − 1 members (submitMany) and a
 * callback waiting for every one of them (a workflow's step, onFailure 'continue', as a batch
 * callback waits), all in one transaction. The callback runs once the last member has run.
 */
export async function submitBatch(
  open: () => CommandStore | Promise<CommandStore>,
  firstSeq: number,
  count: number,
): Promise<void> {
  await withClient(open, async (commands) => {
    const { client } = commands;
    const members = count - 1;
    await client.transaction(async (tx) => {
      const ids = await client.submitMany(
        tx,
        Array.from({ length: members }, (_, i) => ({ type: BENCH_TYPE, payload: { seq: firstSeq + i } })),
      );
      await client
        .workflow('bench-batch')
        .step(
          'callback',
          BENCH_TYPE,
          { seq: firstSeq + members },
          { dependsOn: ids.map((id) => ({ id, onFailure: 'continue' as const })) },
        )
        .submitInTx(tx);
    });
  });
}
