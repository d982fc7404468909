import type { Mailer } from './order-notify.js';

/** A test double: its first send fails as an SMTP server saying "try again later", then it records. */
export function flakyMailer(): { mailer: Mailer; sent: string[] } {
  const sent: string[] = [];
  let calls = 0;
  const mailer: Mailer = {
    async send(to, subject, { idempotencyKey }) {
      calls++;
      if (calls === 1) throw new Error('421 service not available, try again later');
      sent.push(`${to}: ${subject} [${idempotencyKey}]`);
    },
  };
  return { mailer, sent };
}
