// `ReportService`: an injectable service of the application.
import * as preludeInversify from 'inversify';

@preludeInversify.injectable()
export class ReportService {
  async render(reportId: string, version: number, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    void reportId;
    void version;
  }
}
