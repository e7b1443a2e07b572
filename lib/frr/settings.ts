import { isIP, isIPv4 } from 'node:net'
import * as v from 'valibot'
import { ConfigError } from '../errors.ts'

const asNumber = v.pipe(
  v.number(),
  v.integer(),
  v.minValue(1, 'must be an AS number 1..4294967295'),
  v.maxValue(4294967295, 'must be an AS number 1..4294967295'),
)
const tcpPort = v.pipe(
  v.number(),
  v.integer(),
  v.minValue(1, 'must be a port 1..65535'),
  v.maxValue(65535, 'must be a port 1..65535'),
)

/**
 * Hydrazine's BGP speaker: its AS, router id, the fabric routers it peers with and the
 * TCP port bgpd listens on (`bgpd -p`). Validated once at start-up.
 *
 * @example
 * v.parse(BgpSettings, {
 *   localAs: 65001, routerId: '172.18.0.2',
 *   peers: [{ address: '172.18.0.1', remoteAs: 65000 }],
 * }) // listenPort defaults to 179
 */
export const BgpSettings = v.object({
  localAs: asNumber,
  routerId: v.pipe(v.string(), v.check(isIPv4, 'must be an IPv4 address')),
  peers: v.array(
    v.object({
      address: v.pipe(
        v.string(),
        v.check((s) => isIP(s) !== 0, 'must be an IP address'),
      ),
      remoteAs: asNumber,
      /** The peer's BGP port when it is not 179. */
      port: v.optional(tcpPort),
    }),
  ),
  listenPort: v.optional(tcpPort, 179),
  /** Seconds between attempts to open a session to a peer that is down (FRR default 120). */
  connectRetrySeconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 10),
})
export type BgpSettings = v.InferOutput<typeof BgpSettings>
export type BgpSettingsInput = v.InferInput<typeof BgpSettings>

/** Parses BGP settings or throws ConfigError naming every bad field. */
export function parseBgpSettings(input: unknown): BgpSettings {
  const result = v.safeParse(BgpSettings, input)
  if (result.success) return result.output
  const issues = result.issues.map((issue) => ({
    path: v.getDotPath(issue) ?? '',
    message: issue.message,
  }))
  throw new ConfigError(
    `invalid BGP settings: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`,
    issues,
  )
}
