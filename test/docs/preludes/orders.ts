// `orderId` and `order`: the business data an example writes beside its command.
export const orderId = 'o-42';
export const order = { id: orderId, status: 'PAID' };
