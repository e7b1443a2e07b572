/**
 * Keeping the Redis password out of the agent's log: the configuration as one start-up
 * line with the password as `***`, and a log wrapper that hides it in any line, whatever
 * error text a library put in it.
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
function secretsOf(config: Pick<AgentConfig, 'redisUrl'>): string[] {
  try {
    const raw = new URL(config.redisUrl).password
    if (!raw) return []
    return [...new Set([raw, decodeURIComponent(raw)])]
  } catch {
    return []
  }
}

/**
 * Wraps `log` so that no line it prints holds the Redis password, whatever error text
 * a library put in it. The configuration itself is printed with `describeConfig`.
 */
export function redactingLog(
  config: Pick<AgentConfig, 'redisUrl'>,
  log: (line: string) => void,
): (line: string) => void {
  const secrets = secretsOf(config)
  if (secrets.length === 0) return log
  return (line) => log(secrets.reduce((l, secret) => l.split(secret).join('***'), line))
}

/** One line for the start-up log: every option that is set, the Redis password hidden. */
export function describeConfig(config: AgentConfig): string {
  return OPTIONS.flatMap((o) => {
    const value = config[o.key]
    if (value === undefined) return []
    const text = Array.isArray(value) ? value.join(',') : String(value)
    return [`${o.flag}=${o.key === 'redisUrl' ? redactUrl(text) : text}`]
  }).join(' ')
}
