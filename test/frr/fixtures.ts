import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import type { Redis } from 'ioredis'
import type { Announcement, AnnouncementSource } from '../../lib/frr/index.ts'
import { createVtysh, type Vtysh } from '../../lib/frr/index.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'

const run = promisify(execFile)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
let serial = 0

/**
 * Two network namespaces joined by a veth: `hydrazine` (10.77.0.1) and `fabric`
 * (10.77.0.2) on 10.77.0.0/24. NAT IPs of simulated DPUs live on the same subnet
 * (e.g. 10.77.0.105), as on the seed's fabric. Deleted when the test ends.
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
  for (const [ns, dev, addr] of [
    [hydrazine, `${tag}a`, '10.77.0.1/24'],
    [fabric, `${tag}b`, '10.77.0.2/24'],
  ] as const) {
    await ip('-n', ns, 'addr', 'add', addr, 'dev', dev)
    await ip('-n', ns, 'link', 'set', dev, 'up')
    await ip('-n', ns, 'link', 'set', 'lo', 'up')
  }
  return {
    hydrazine,
    fabric,
    hydrazineIp: '10.77.0.1',
    fabricIp: '10.77.0.2',
    hydrazineDev: `${tag}a`,
  }
}

/**
 * A "fabric router": zebra + bgpd in `netns`, peering with Hydrazine's FRR. Learned
 * routes go to its RIB, so `show ip route json` shows what the fabric would forward.
 * `disable-connected-check` lets it accept a next hop (a NAT IP) that is not on the
 * peering subnet but reachable through its own routes, as on a routed fabric.
 */
export async function startFabricRouter(
  t: Teardown,
  opts: { netns: string; routerId: string; localAs: number; peer: string; peerAs: number },
): Promise<Vtysh> {
  const router = await withStack(t, {
    redis: false,
    frr: {
      netns: opts.netns,
      hostname: 'fabric',
      installRoutes: true,
      bgpdConfig: [
        `router bgp ${opts.localAs}`,
        ` bgp router-id ${opts.routerId}`,
        ' no bgp ebgp-requires-policy',
        ` neighbor ${opts.peer} remote-as ${opts.peerAs}`,
        ` neighbor ${opts.peer} timers 1 3`,
        ` neighbor ${opts.peer} timers connect 1`,
        ` neighbor ${opts.peer} disable-connected-check`,
        'exit',
        '',
      ].join('\n'),
    },
  })
  if (!router.frr) throw new Error('fabric router FRR did not start')
  return createVtysh({ vtyDir: router.frr.vtyDir })
}

/** The fabric router's kernel-bound routes learned over BGP: prefix → next hop. */
export async function fabricBgpRoutes(fabric: Vtysh): Promise<Map<string, string>> {
  const rib = JSON.parse(await fabric.show('show ip route json')) as Record<
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
 * The store of what must be announced, for tests: a Redis hash publicIp → next hop.
 * (The real source reads allocated public IPs from the state store.)
 */
export function redisAnnouncementSource(redis: Redis, key: string): AnnouncementSource {
  return {
    async desired(): Promise<Announcement[]> {
      const hash = await redis.hgetall(key)
      return Object.entries(hash).map(([ip, nextHop]) => ({ prefix: `${ip}/32`, nextHop }))
    },
  }
}
