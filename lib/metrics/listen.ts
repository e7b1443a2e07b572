/**
 * A metrics listener's address: `host:port` (`[v6]:port` for IPv6), or `off`. Parsed the
 * same way for the controller (`HYDRAZINE_METRICS_LISTEN`) and the agent
 * (`--metrics-listen`).
 */

/** Where a metrics listener binds. */
export interface MetricsListen {
  readonly host: string
  /** 0 picks a free port. */
  readonly port: number
}

const LISTEN = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+)):(\d{1,5})$/

/**
 * The listener address `text` names, `off`, or undefined when it is neither.
 *
 * @example parseMetricsListen('127.0.0.1:9464') // { host: '127.0.0.1', port: 9464 }
 * @example parseMetricsListen('[::1]:9464') // { host: '::1', port: 9464 }
 */
export function parseMetricsListen(text: string): MetricsListen | 'off' | undefined {
  if (text === 'off') return 'off'
  const match = LISTEN.exec(text)
  const host = match?.[1] ?? match?.[2]
  const port = Number(match?.[3])
  if (!host || !(port >= 0 && port <= 65535)) return undefined
  return { host, port }
}
