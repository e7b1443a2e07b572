/**
 * Reading a Prometheus scrape in tests: the samples of the text format, and one sample's
 * value by name and labels.
 */

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/** The samples of a text-format scrape (comments and blank lines left out). */
export function parseScrape(text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!match?.[1] || !match[3]) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) {
      if (key)
        labels[key] = (value ?? '').replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c))
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) })
  }
  return samples
}

/**
 * The value of the one sample named `name` whose labels include `labels`; undefined when
 * there is none, an error when there are several.
 */
export function sampleValue(
  samples: readonly Sample[],
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number | undefined {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )
  if (found.length > 1) throw new Error(`${found.length} samples ${name} ${JSON.stringify(labels)}`)
  return found[0]?.value
}

/** GETs a metrics URL and parses it; fails on a status other than 200. */
export async function scrape(url: string, init: RequestInit = {}): Promise<Sample[]> {
  const res = await fetch(url, init)
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`)
  return parseScrape(await res.text())
}
