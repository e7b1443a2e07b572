/**
 * A group's `network6` moved (or added) while a host's attach still works from the
 * group's old spec. Each interleaving is forced at the handlers' checkpoints, so it
 * happens on every run: whichever order they meet in, the group is Ready at its new spec
 * (never Failed) and the host is Ready with its SLAAC address in the new /64, the only
 * one IPAM holds.
 */
import t from 'tap'
import { eui64Address } from '../../lib/ipam/address.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import type { Teardown } from '../helpers/stack.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'

const OLD = { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }
const NEW = { cidr: 'fd00:20::/64', gateway: 'fd00:20::1' }
const GROUP = 'group-r'

/** Something that happens once; `fired` resolves when it has. */
function signal() {
  let fire = () => {}
  const fired = new Promise<void>((resolve) => {
    fire = resolve
  })
  let done = false
  return {
    fire: () => {
      done = true
      fire()
    },
    fired,
    get done() {
      return done
    },
  }
}

/** Waits for `event`, at most `ms`: a step the fix makes unreachable must not hang a test. */
async function within(event: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms)
  })
  await Promise.race([event, timeout]).finally(() => clearTimeout(timer))
}

/** One-shot actions at handler checkpoints: each runs, awaited, the next time its point is reached. */
function checkpoints() {
  const armed = new Map<string, () => Promise<void>>()
  return {
    at(point: string, action: () => Promise<void>) {
      armed.set(point, action)
    },
    async reached(point: string) {
      const action = armed.get(point)
      if (!action) return
      armed.delete(point)
      await action()
    },
  }
}

/** The pipeline with one agent, and `group-r` provisioned with `network6` (or none). */
async function pipelineWithGroup(
  t: Teardown,
  hooks: ReturnType<typeof checkpoints>,
  network6: typeof OLD | undefined,
) {
  const p = await startPipeline(t, { checkpoint: (point) => hooks.reached(point) })
  await p.agent('dpu-1')
  await p.client.applyGroup(GROUP, { ...groupSpec(), ...(network6 ? { network6 } : {}) })
  await until(
    () => p.controller.store.groups.get(GROUP),
    (g) => g?.status.phase === 'Ready',
  )
  return p
}

/** Gives the group network6 `NEW`; resolves with its status once Ready at version 2, or Failed. */
async function moveNetwork6(p: Pipeline) {
  await p.client.applyGroup(GROUP, { ...groupSpec(), network6: NEW })
  const group = await until(
    () => p.controller.store.groups.get(GROUP),
    (g) => g?.status.phase === 'Failed' || g?.status.observedVersion === 2,
  )
  return group?.status
}

/** The host Ready in the new /64 (or Failed), its port and what IPAM holds in IPv6. */
async function settled(p: Pipeline, name: string, mac: string) {
  const host = await until(
    () => p.controller.store.hosts.get(name),
    (h) =>
      h?.status.phase === 'Failed' ||
      (h?.status.phase === 'Ready' &&
        h.status.hostAccessIPs?.hostIPv6 === eui64Address(NEW.cidr, mac)),
  )
  const port =
    host?.status.phase === 'Ready'
      ? await until(
          () => p.switchPort(topologyNames.hostPort(GROUP, name)),
          (sp) => sp?.addresses[0]?.endsWith(eui64Address(NEW.cidr, mac)) === true,
        )
      : undefined
  const ipv6 = (await p.client.groupIpam(GROUP)).allocations.filter((a) => a.ip.includes(':'))
  return { status: host?.status, port: port?.addresses[0], ipv6 }
}

t.test(
  'an attach takes its old address while the move defines the new network: the group is not Failed',
  async (t) => {
    const hooks = checkpoints()
    const p = await pipelineWithGroup(t, hooks, OLD)
    const mac = '0a:00:00:00:00:31'
    await p.client.applyHost('r1', hostSpec(GROUP, 'dpu-1', 1, { hostMAC: mac }))
    await until(
      () => p.controller.store.hosts.get('r1'),
      (h) => h?.status.phase === 'Ready',
    )

    // r1's next attach reads the group (network6 OLD) and waits; the move's group.create
    // then goes as far as defining the new network and waits for that attach to take its
    // SLAAC address in OLD.
    const read = signal()
    const defining = signal()
    const allocated = signal()
    hooks.at('attach:group-read', async () => {
      read.fire()
      await within(defining.fired, 10_000)
    })
    hooks.at('create:defining-network', async () => {
      defining.fire()
      await within(allocated.fired, 10_000)
    })
    hooks.at('attach:allocated', async () => allocated.fire())
    await p.client.applyHost('r1', hostSpec(GROUP, 'dpu-1', 1, { hostMAC: mac, hostname: 'r' }))
    await within(read.fired, 10_000)
    t.ok(read.done, "r1's attach read the group before the move")

    const group = await moveNetwork6(p)
    t.ok(defining.done && allocated.done, 'the attach allocated while the move defined the network')
    t.match(
      group?.phase,
      /^(Ready|Configuring)$/,
      `the group is provisioned: Ready, or Configuring while r1 attaches (${JSON.stringify(group?.conditions)})`,
    )
    t.equal(group?.observedVersion, 2, 'at its new spec')

    const r1 = await settled(p, 'r1', mac)
    t.equal(r1.status?.phase, 'Ready', `r1 is Ready (${JSON.stringify(r1.status?.conditions)})`)
    t.equal(r1.status?.hostAccessIPs?.hostIPv6, eui64Address(NEW.cidr, mac), 'in the new /64')
    t.match(r1.port, eui64Address(NEW.cidr, mac), 'its port holds that address')
    t.same(r1.ipv6, [{ owner: 'ipv6/r1', ip: eui64Address(NEW.cidr, mac) }], 'IPAM holds it only')
  },
)

// A host's first attach reads the group and waits until the change is done (the group
// Ready at it): its addresses then come from a spec the group no longer has.
const lateAttaches = [
  {
    name: 'network6 moved: its old address lies in no subnet now',
    from: OLD,
    mac: '0a:00:00:00:00:32',
  },
  { name: 'network6 added: it would take none', from: undefined, mac: '0a:00:00:00:00:33' },
]
for (const c of lateAttaches) {
  t.test(
    `an attach that read the group before a change: retried, not Failed (${c.name})`,
    async (t) => {
      const hooks = checkpoints()
      const p = await pipelineWithGroup(t, hooks, c.from)
      const read = signal()
      const moved = signal()
      hooks.at('attach:group-read', async () => {
        read.fire()
        await within(moved.fired, 20_000)
      })
      await p.client.applyHost('r2', hostSpec(GROUP, 'dpu-1', 2, { hostMAC: c.mac }))
      await within(read.fired, 10_000)
      t.ok(read.done, "r2's attach read the group before the change")

      const group = await moveNetwork6(p)
      moved.fire()
      t.match(
        group?.phase,
        /^(Ready|Configuring)$/,
        'the group is provisioned at its new spec: Ready, or Configuring while r2 attaches',
      )

      const r2 = await settled(p, 'r2', c.mac)
      t.equal(r2.status?.phase, 'Ready', `r2 is Ready (${JSON.stringify(r2.status?.conditions)})`)
      t.equal(r2.status?.hostAccessIPs?.hostIPv6, eui64Address(NEW.cidr, c.mac), 'in the new /64')
      t.match(r2.port, eui64Address(NEW.cidr, c.mac), 'its port holds that address')
      t.same(
        r2.ipv6,
        [{ owner: 'ipv6/r2', ip: eui64Address(NEW.cidr, c.mac) }],
        'IPAM holds it only',
      )
    },
  )
}
