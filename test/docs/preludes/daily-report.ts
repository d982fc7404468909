// `dailyReport`: the executor of the recurring example of docs/recurring.md.
import * as preludeRuntime from '@asynccmd/runtime';

export const dailyReport = preludeRuntime.defineExecutor<'report.daily', { day: string }>({
  type: 'report.daily',
  execute: () => undefined,
});
