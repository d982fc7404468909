// `mailer`: the application's mail client (here one that sends nothing).
export const mailer = {
  async send(_orderId: string, _options: { signal: AbortSignal; idempotencyKey: string }): Promise<void> {},
};
