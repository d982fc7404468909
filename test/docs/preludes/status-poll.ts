// `status` (the status resource a 202 answered with) and `apiBase` (where the API is).
export declare const status: string;
export const apiBase = 'https://shop.example.test';
