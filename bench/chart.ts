/** SVG line charts for docs/benchmarks, drawn by hand: no dependency. */

export interface Series { name: string; points: Array<[number, number]> }

export interface ChartAxes {
  /** Labelled x positions (categories, such as percentiles) instead of five evenly spaced numbers from 0. */
  xTicks?: Array<[number, string]>;
  /** A log10 y axis, for values spread over decades (latencies from 0.1 ms to 100s of ms). */
  logY?: boolean;
}

const COLORS = ['#d62728', '#1f77b4', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#7f7f7f'];
const [W, H, LEFT, RIGHT, TOP, BOTTOM] = [800, 400, 70, 250, 40, 50];

/** Where values go on an axis: the position of a value, and the ticks to draw with their labels. */
interface Scale { at(value: number): number; ticks: Array<[number, string]> }

function linearY(max: number): Scale {
  const top = Math.max(1, max) * 1.1;
  return { at: (v) => H - BOTTOM - (v / top) * (H - TOP - BOTTOM), ticks: [0, 0.25, 0.5, 0.75, 1].map((t) => [t * top, (t * top).toFixed(0)]) };
}

function logY(values: number[]): Scale {
  const positive = values.filter((v) => v > 0);
  const low = Math.floor(Math.log10(Math.min(...positive, 1)));
  const high = Math.ceil(Math.log10(Math.max(...positive, 10)));
  const at = (v: number): number => H - BOTTOM - ((Math.log10(Math.max(v, 10 ** low)) - low) / (high - low)) * (H - TOP - BOTTOM);
  const ticks = Array.from({ length: high - low + 1 }, (_, i): [number, string] => [10 ** (low + i), String(10 ** (low + i))]);
  return { at, ticks };
}

function xScale(points: Array<[number, number]>, labelled: Array<[number, string]> | undefined): Scale {
  const max = Math.max(1, ...points.map((p) => p[0]), ...(labelled ?? []).map(([x]) => x));
  const ticks = labelled ?? [0, 0.25, 0.5, 0.75, 1].map((t): [number, string] => [t * max, Math.round(t * max).toLocaleString('en-US')]);
  return { at: (v) => LEFT + (v / max) * (W - LEFT - RIGHT), ticks };
}

/** A line chart: one polyline per series, axes with a few ticks, a legend. */
export function lineChart(title: string, xLabel: string, yLabel: string, series: Series[], axes: ChartAxes = {}): string {
  const all = series.flatMap((s) => s.points);
  const x = xScale(all, axes.xTicks);
  const y = axes.logY ? logY(all.map((p) => p[1])) : linearY(Math.max(...all.map((p) => p[1])));
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`, `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${title}</text>`];
  for (const [value, label] of y.ticks) {
    out.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${y.at(value)}" y2="${y.at(value)}" stroke="#ddd"/>`,
      `<text x="${LEFT - 6}" y="${y.at(value) + 4}" text-anchor="end">${label}</text>`);
  }
  for (const [value, label] of x.ticks) out.push(`<text x="${x.at(value)}" y="${H - BOTTOM + 16}" text-anchor="middle">${label}</text>`);
  out.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${H - BOTTOM}" stroke="black"/>`, `<line x1="${LEFT}" x2="${W - RIGHT}" y1="${H - BOTTOM}" y2="${H - BOTTOM}" stroke="black"/>`,
    `<text x="${(LEFT + W - RIGHT) / 2}" y="${H - 12}" text-anchor="middle">${xLabel}</text>`,
    `<text transform="translate(16 ${(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">${yLabel}</text>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const place = ([a, b]: [number, number]): string => `${x.at(a).toFixed(1)},${y.at(b).toFixed(1)}`;
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${s.points.map(place).join(' ')}"/>`,
      ...s.points.map(([a, b]) => `<circle cx="${x.at(a).toFixed(1)}" cy="${y.at(b).toFixed(1)}" r="3" fill="${color}"/>`),
      `<line x1="${W - RIGHT + 12}" x2="${W - RIGHT + 32}" y1="${TOP + 10 + i * 20}" y2="${TOP + 10 + i * 20}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${W - RIGHT + 38}" y="${TOP + 14 + i * 20}">${s.name}</text>`);
  });
  return `${out.join('\n')}\n</svg>\n`;
}

/** A bar chart: one bar per labelled value (what a client costs each part), its value written above it. */
export function barChart(title: string, yLabel: string, bars: Array<[label: string, value: number]>): string {
  const y = linearY(Math.max(...bars.map(([, value]) => value)));
  const slot = (W - LEFT - 40) / Math.max(1, bars.length);
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`, `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${title}</text>`];
  for (const [value] of y.ticks) out.push(`<line x1="${LEFT}" x2="${W - 40}" y1="${y.at(value)}" y2="${y.at(value)}" stroke="#ddd"/>`);
  bars.forEach(([label, value], i) => {
    const x = LEFT + i * slot + slot * 0.15;
    const top = y.at(value);
    out.push(`<rect x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${(slot * 0.7).toFixed(1)}" height="${(H - BOTTOM - top).toFixed(1)}" fill="${COLORS[i % COLORS.length]}"/>`,
      `<text x="${(x + slot * 0.35).toFixed(1)}" y="${(top - 6).toFixed(1)}" text-anchor="middle">${value.toFixed(2)}</text>`,
      `<text x="${(x + slot * 0.35).toFixed(1)}" y="${H - BOTTOM + 16}" text-anchor="middle">${label}</text>`);
  });
  out.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${H - BOTTOM}" stroke="black"/>`, `<line x1="${LEFT}" x2="${W - 40}" y1="${H - BOTTOM}" y2="${H - BOTTOM}" stroke="black"/>`,
    ...y.ticks.map(([value, label]) => `<text x="${LEFT - 6}" y="${y.at(value) + 4}" text-anchor="end">${label}</text>`),
    `<text transform="translate(16 ${(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">${yLabel}</text>`);
  return `${out.join('\n')}\n</svg>\n`;
}
