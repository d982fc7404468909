import type pg from 'pg';

/** A node of EXPLAIN (FORMAT JSON), with the fields the plan tests read. */
export interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly 'Actual Rows'?: number;
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** `plan` and every node under it. */
export const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/** A statement auto_explain logged: its text and its plan. */
export interface LoggedPlan {
  readonly 'Query Text': string;
  readonly Plan: PlanNode;
}

/**
 * Turns auto_explain on for `client`, the statements functions run included, analyzed (with
 * buffers if asked), as JSON notices to this client; returns what it logs: take the plans with
 * `plansOf`, empty it between statements.
 */
export async function explainEverything(client: pg.Client, { buffers = false } = {}): Promise<string[]> {
  const logged: string[] = [];
  client.on('notice', (notice) => logged.push(notice.message ?? ''));
  await client.query(`LOAD 'auto_explain'`);
  await client.query(`SET auto_explain.log_min_duration = 0`);
  await client.query(`SET auto_explain.log_nested_statements = on`);
  await client.query(`SET auto_explain.log_analyze = on`);
  if (buffers) await client.query(`SET auto_explain.log_buffers = on`);
  await client.query(`SET auto_explain.log_format = json`);
  await client.query(`SET client_min_messages = log`);
  return logged;
}

/** The plans in auto_explain's notices. */
export const plansOf = (logged: readonly string[]): LoggedPlan[] =>
  logged.map((m) => JSON.parse(m.slice(m.indexOf('{'))) as LoggedPlan);
