/**
 * Keeping the Redis password (and the metrics token) out of the agent's log: the
 * configuration as one start-up line with them as `***`, and a log wrapper that hides
 * them in any line, whatever error text a library put in it.
 */
import { type AgentConfig, OPTIONS } from './config-options.ts'

/**
 * `url` with its password replaced by `***`, for logs.
 *
 * @example redactUrl('rediss://agent:s3cret@10.0.0.1:6380') // 'rediss://agent:***@10.0.0.1:6380'
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString().replace(/\/$/, '')
  } catch {
    return '(an unparsable URL)'
  }
}

/** The secrets of a configuration, as they could appear in a log line. */
function secretsOf(config: Pick<AgentConfig, 'redisUrl' | 'metricsToken'>): string[] {
  const token = config.metricsToken ? [config.metricsToken] : []
  try {
    const raw = new URL(config.redisUrl).password
    if (!raw) return token
    return [...new Set([raw, decodeURIComponent(raw), ...token])]
  } catch {
    return token
  }
}

/**
 * Wraps `log` so that no line it prints holds the Redis password, whatever error text
 * a library put in it. The configuration itself is printed with `describeConfig`.
 */
export function redactingLog(
  config: Pick<AgentConfig, 'redisUrl' | 'metricsToken'>,
  log: (line: string) => void,
): (line: string) => void {
  const secrets = secretsOf(config)
  if (secrets.length === 0) return log
  return (line) => log(secrets.reduce((l, secret) => l.split(secret).join('***'), line))
}

/**
 * One line for the start-up log: every option that is set, the Redis password and the
 * metrics token hidden.
 */
export function describeConfig(config: AgentConfig): string {
  return OPTIONS.flatMap((o) => {
    const value = config[o.key]
    if (value === undefined) return []
    const text = Array.isArray(value) ? value.join(',') : String(value)
    const shown = o.key === 'redisUrl' ? redactUrl(text) : o.key === 'metricsToken' ? '***' : text
    return [`${o.flag}=${shown}`]
  }).join(' ')
}
