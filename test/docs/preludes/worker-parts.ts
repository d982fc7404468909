// `sendMail` and `digest`: a worker module's executor and recurring schedule.
import * as preludeRuntime from '@asynccmd/runtime';

export const sendMail = preludeRuntime.defineExecutor<'mail.send', { to: string }>({
  type: 'mail.send',
  execute: () => undefined,
});
export const digest: preludeRuntime.RecurringSchedule = {
  name: 'digest',
  cron: '0 0 7 * * *',
  type: 'mail.send',
  payload: { to: 'team' },
};
