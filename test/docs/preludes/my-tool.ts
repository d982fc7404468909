// `myTool` and `myTransaction`: another tool's raw query and transaction hooks.
export declare const myTool: {
  raw(sql: string, values: readonly unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
};
export declare const myTransaction: { afterCommit(listener: () => void): void };
