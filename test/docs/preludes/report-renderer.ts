// `renderReport`: the application's report job.
export declare function renderReport(day: string, signal: AbortSignal): Promise<void>;
