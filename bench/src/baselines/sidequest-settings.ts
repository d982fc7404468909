/** The settings the Sidequest rows run with, in words (kept apart so reading them loads no Sidequest). */
export function sidequestSettings(pollMs: number): string {
  return `runner "inline", fork false, jobPollingInterval ${pollMs} ms, queue concurrency C, maxConcurrentJobs C, dashboard off`;
}
