// `billing`: the application's billing client.
export declare const billing: {
  issue(orderId: string, options: { idempotencyKey: string }): Promise<{ number: string }>;
};
