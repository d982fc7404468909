// `app`, an Express application (as far as the example uses it), and `markRefundRequested`, the
// application's business write.
import type { IncomingMessage, ServerResponse } from 'node:http';

interface PreludeResponse {
  status(code: number): PreludeResponse;
  location(url: string): PreludeResponse;
  json(body: unknown): PreludeResponse;
}
export declare const app: {
  use(handler: (req: IncomingMessage, res: ServerResponse) => unknown): void;
  post(path: string, handler: (req: { params: { id: string } }, res: PreludeResponse) => Promise<void>): void;
};
export declare function markRefundRequested(tx: unknown, orderId: string): Promise<void>;
