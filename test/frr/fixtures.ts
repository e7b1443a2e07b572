import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type { Redis } from 'ioredis'
import type { Announcement, AnnouncementSource } from '../../lib/frr/index.ts'
import {
  createVtysh,
  parseBgpSettings,
  publicPrefix,
  renderBgpdConfig,
  type Vtysh,
} from '../../lib/frr/index.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'

const run = promisify(execFile)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
let serial = 0

/**
 * Two network namespaces joined by a veth: `hydrazine` (10.77.0.1, fd00:77::1) and `fabric`
 * (10.77.0.2, fd00:77::2) on 10.77.0.0/24 and fd00:77::/64. NAT addresses of simulated DPUs
 * live on the same subnets (e.g. 10.77.0.105, fd00:77::105), as a DPU's NAT address does on
 * a real fabric. The BGP session runs over IPv4. Without duplicate address detection, every
 * IPv6 address (the link-local ones too) is usable as soon as the link is up. Deleted when
 * the test ends.
 */
export async function withNetnsPair(t: Teardown) {
  const tag = `hzf${process.pid}${serial++}`
  const hydrazine = `${tag}h`
  const fabric = `${tag}f`
  const ip = (...args: string[]) => run('ip', args)
  t.teardown(async () => {
    await ip('netns', 'del', hydrazine).catch(() => {})
    await ip('netns', 'del', fabric).catch(() => {})
  })
  await ip('netns', 'add', hydrazine)
  await ip('netns', 'add', fabric)
  await ip('link', 'add', `${tag}a`, 'type', 'veth', 'peer', 'name', `${tag}b`)
  await ip('link', 'set', `${tag}a`, 'netns', hydrazine)
  await ip('link', 'set', `${tag}b`, 'netns', fabric)
  for (const [ns, dev, addr, addr6] of [
    [hydrazine, `${tag}a`, '10.77.0.1/24', 'fd00:77::1/64'],
    [fabric, `${tag}b`, '10.77.0.2/24', 'fd00:77::2/64'],
  ] as const) {
    await run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${dev}.disable_ipv6=0`])
    await run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${dev}.accept_dad=0`])
    await ip('-n', ns, 'addr', 'add', addr, 'dev', dev)
    await ip('-n', ns, 'addr', 'add', addr6, 'dev', dev, 'nodad')
    await ip('-n', ns, 'link', 'set', dev, 'up')
    await ip('-n', ns, 'link', 'set', 'lo', 'up')
  }
  return {
    hydrazine,
    fabric,
    hydrazineIp: '10.77.0.1',
    fabricIp: '10.77.0.2',
    hydrazineIp6: 'fd00:77::1',
    fabricIp6: 'fd00:77::2',
    hydrazineDev: `${tag}a`,
    fabricDev: `${tag}b`,
  }
}

/**
 * The fabric router's inbound policy for Hydrazine's IPv6 unicast routes (with `ipv6`):
 * `set ipv6 next-hop prefer-global`. Hydrazine's bgpd sends its own link-local address
 * beside each /128's global next hop (the DPU's NAT address), and FRR would install the
 * link-local one.
 */
export const FABRIC_IPV6_IN = 'FROM-HYDRAZINE-V6'

/**
 * A "fabric router": zebra + bgpd in `netns`, peering with Hydrazine's FRR. Learned
 * routes go to its RIB, so `show ip route json` shows what the fabric would forward.
 * `disable-connected-check` lets it accept a next hop (a NAT IP) that is not on the
 * peering subnet but reachable through its own routes, as on a routed fabric. With
 * `ipv6`, it also takes IPv6 unicast routes over the (IPv4) session, preferring their
 * global next hop (`FABRIC_IPV6_IN`); without, it speaks IPv4 only.
 */
export async function startFabricRouter(
  t: Teardown,
  opts: {
    netns: string
    routerId: string
    localAs: number
    peer: string
    peerAs: number
    ipv6?: boolean
  },
): Promise<Vtysh> {
  const ipv6 = opts.ipv6
    ? [
        ' address-family ipv6 unicast',
        `  neighbor ${opts.peer} activate`,
        `  neighbor ${opts.peer} route-map ${FABRIC_IPV6_IN} in`,
        ' exit-address-family',
      ]
    : []
  const router = await withStack(t, {
    redis: false,
    frr: {
      netns: opts.netns,
      hostname: 'fabric',
      installRoutes: true,
      bgpdConfig: [
        ...(opts.ipv6
          ? [`route-map ${FABRIC_IPV6_IN} permit 10`, ' set ipv6 next-hop prefer-global', 'exit']
          : []),
        `router bgp ${opts.localAs}`,
        ` bgp router-id ${opts.routerId}`,
        ' no bgp ebgp-requires-policy',
        ` neighbor ${opts.peer} remote-as ${opts.peerAs}`,
        ` neighbor ${opts.peer} timers 1 3`,
        ` neighbor ${opts.peer} timers connect 1`,
        ` neighbor ${opts.peer} disable-connected-check`,
        ...ipv6,
        'exit',
        '',
      ].join('\n'),
    },
  })
  if (!router.frr) throw new Error('fabric router FRR did not start')
  return createVtysh({ vtyDir: router.frr.vtyDir })
}

/**
 * Hydrazine's bgpd (AS 65001, its base configuration, in the pair's `hydrazine` namespace,
 * with a private Redis when `redis`) peered over IPv4 with a fabric router (AS 65000) in
 * `fabric`; with `ipv6`, the fabric router takes IPv6 routes too. `before` runs once the
 * namespaces exist, before either bgpd starts.
 */
export async function withPeeredBgpd(
  t: Teardown,
  opts: {
    readonly redis?: boolean
    readonly ipv6?: boolean
    readonly before?: (ns: Awaited<ReturnType<typeof withNetnsPair>>) => Promise<void>
  } = {},
) {
  const ns = await withNetnsPair(t)
  await opts.before?.(ns)
  const settings = parseBgpSettings({
    localAs: 65001,
    routerId: ns.hydrazineIp,
    peers: [{ address: ns.fabricIp, remoteAs: 65000 }],
    connectRetrySeconds: 1,
  })
  const stack = await withStack(t, {
    redis: opts.redis ?? false,
    frr: {
      netns: ns.hydrazine,
      bgpdConfig: renderBgpdConfig(settings),
      bgpPort: settings.listenPort,
    },
  })
  const vtyDir = stack.frr?.vtyDir
  if (!vtyDir) throw new Error('stack started without frr')
  const fabric = await startFabricRouter(t, {
    netns: ns.fabric,
    routerId: ns.fabricIp,
    localAs: 65000,
    peer: ns.hydrazineIp,
    peerAs: 65001,
    ...(opts.ipv6 ? { ipv6: true } : {}),
  })
  return { ns, stack, vtyDir, fabric }
}

/** The fabric router's kernel-bound routes learned over BGP: prefix → next hop. */
export async function fabricBgpRoutes(
  fabric: Vtysh,
  family: 'ipv4' | 'ipv6' = 'ipv4',
): Promise<Map<string, string>> {
  const show = family === 'ipv4' ? 'show ip route json' : 'show ipv6 route json'
  const rib = JSON.parse(await fabric.show(show)) as Record<
    string,
    { protocol?: string; selected?: boolean; nexthops?: { ip?: string }[] }[]
  >
  const routes = new Map<string, string>()
  for (const [prefix, entries] of Object.entries(rib)) {
    const route = entries.find((e) => e.protocol === 'bgp' && e.selected === true)
    const nextHop = route?.nexthops?.[0]?.ip
    if (nextHop !== undefined) routes.set(prefix, nextHop)
  }
  return routes
}

/** Polls until `check` holds (returns its last value either way). */
export async function eventually<T>(
  read: () => Promise<T>,
  check: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (check(value) || Date.now() > deadline) return value
    await sleep(100)
  }
}

/**
 * The store of what must be announced, for tests: a Redis hash publicIp (IPv4 or IPv6) →
 * next hop. (The real source reads allocated public IPs from the state store.)
 */
export function redisAnnouncementSource(redis: Redis, key: string): AnnouncementSource {
  return {
    async desired(): Promise<Announcement[]> {
      const hash = await redis.hgetall(key)
      return Object.entries(hash).map(([ip, nextHop]) => ({ prefix: publicPrefix(ip), nextHop }))
    },
  }
}
