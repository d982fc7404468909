import type { Logger } from '@asynccmd/core';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * One JSON object a line (`time`, `level`, `msg`, then the fields), the shape log collectors parse
 * without configuration. Errors are written as their name, code and message, without the stack.
 */
export function jsonLogger(write: (line: string) => void, level: LogLevel, base: object = {}): Logger {
  const threshold = LOG_LEVELS.indexOf(level);
  const at =
    (lvl: LogLevel) =>
    (obj: object, msg?: string): void => {
      if (LOG_LEVELS.indexOf(lvl) < threshold) return;
      const entry = {
        time: new Date().toISOString(),
        level: lvl,
        ...(msg !== undefined ? { msg } : {}),
        ...base,
      };
      write(`${JSON.stringify({ ...entry, ...obj }, errorsAsFields)}\n`);
    };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

function errorsAsFields(_key: string, value: unknown): unknown {
  if (!(value instanceof Error)) return value;
  const code = (value as { code?: unknown }).code;
  return { type: value.name, ...(typeof code === 'string' ? { code } : {}), message: value.message };
}
