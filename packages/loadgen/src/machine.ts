/** The machine a figure was taken on, as the benchmark rules ask every figure to name. */
import { readFileSync } from 'node:fs';
import { availableParallelism, release, totalmem } from 'node:os';

export interface Machine {
  cores: number;
  cpuModel: string;
  memoryBytes: number;
  node: string;
  kernel: string;
}

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export function machine(): Machine {
  return { cores: availableParallelism(), cpuModel: cpuModel(), memoryBytes: totalmem(), node: process.version, kernel: `${process.platform} ${release()}` };
}

export function describeMachine(m: Machine): string {
  return `${m.cores} cores, ${m.cpuModel}, ${(m.memoryBytes / 2 ** 30).toFixed(1)} GiB, node ${m.node}, ${m.kernel}`;
}
