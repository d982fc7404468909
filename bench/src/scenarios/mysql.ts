import type { Recorder } from './recorder.js';
import type { Sizes } from './sizes.js';

export async function benchMysql(_sizes: Sizes, _rec: Recorder, log: (line: string) => void): Promise<void> {
  log('MySQL scenarios: not yet');
}
