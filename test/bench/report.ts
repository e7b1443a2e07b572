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

/**
 * `HYDRAZINE_BENCH_SCALE`, checked: a number in (0, 1]; 1 when unset. Every suite shrinks
 * its counts by it (`scaled`), so that a small scale (0.01) is a smoke run of seconds.
 */
export function benchScale(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.HYDRAZINE_BENCH_SCALE?.trim()
  if (text === undefined || text === '') return 1
  const scale = Number(text)
  if (!Number.isFinite(scale) || scale <= 0 || scale > 1)
    throw new Error(`HYDRAZINE_BENCH_SCALE must be a number in (0, 1], not ${JSON.stringify(text)}`)
  return scale
}

/**
 * A count at `scale`: `n × scale` rounded, never below `min` (`n` itself at scale 1).
 *
 * @example
 * scaled(1000, 0.01, 5) // 10
 */
export function scaled(n: number, scale: number, min = 1): number {
  return Math.max(min, Math.round(n * scale))
}

/** What a figure's note adds below scale 1: `; HYDRAZINE_BENCH_SCALE=<scale>` (nothing at 1). */
export function scaleNote(scale: number): string {
  return scale < 1 ? `; HYDRAZINE_BENCH_SCALE=${scale}` : ''
}

/** The q-quantile (0..1) of a list of samples, by nearest rank. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank] ?? Number.NaN
}
