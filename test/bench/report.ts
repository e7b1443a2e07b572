/**
 * One benchmark figure, printed as a single machine-readable line:
 *
 *   BENCH {"suite":"ipam","metric":"alloc_per_s","value":41000,"unit":"1/s","baseline":80000,"ratio":0.51}
 *
 * `baseline` is a figure measured in the same run (machines are noisy, so absolute
 * numbers mean little across runs); `ratio` says how the value compares with it, in the
 * direction the suite documents (e.g. baseline / value for times, value / baseline for rates).
 */
export interface BenchFigure {
  suite: string
  metric: string
  value: number
  unit: string
  baseline?: number
  ratio?: number
  /** Free text: what was measured, scale-downs, targets. */
  note?: string
}

const round = (n: number): number => (Number.isInteger(n) ? n : Math.round(n * 1000) / 1000)

export function report(figure: BenchFigure): void {
  const line: Record<string, string | number> = {
    suite: figure.suite,
    metric: figure.metric,
    value: round(figure.value),
    unit: figure.unit,
  }
  if (figure.baseline !== undefined) line.baseline = round(figure.baseline)
  if (figure.ratio !== undefined) line.ratio = round(figure.ratio)
  if (figure.note !== undefined) line.note = figure.note
  process.stdout.write(`BENCH ${JSON.stringify(line)}\n`)
}

/** The q-quantile (0..1) of a list of samples, by nearest rank. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank] ?? Number.NaN
}
