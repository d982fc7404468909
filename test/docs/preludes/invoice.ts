// `payload`: an invoice.send command's payload.
export const payload = { invoiceId: 'i-1' };
