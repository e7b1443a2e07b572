import t from 'tap'
import { type Claim, claimPort, type ExistingPort, granted, type PortClaim } from './port-claims.ts'

const hostClaim: PortClaim = {
  name: 'pf0hpf',
  bridge: 'br-int',
  role: 'host',
  owner: { 'iface-id': 'tenant-a-h1' },
}
const relayClaim: PortClaim = {
  name: 'hzr0000002a',
  bridge: 'br-int',
  role: 'dhcp-relay',
  owner: { 'hydrazine:group': 'tenant-a' },
}

const port = (p: Partial<ExistingPort> & Pick<ExistingPort, 'name'>): ExistingPort => ({
  bridge: 'br-int',
  role: undefined,
  externalIds: {},
  ...p,
})

t.test('a port is created, kept, or refused: never moved, taken over or rebound', async (t) => {
  const cases: [string, ExistingPort | undefined, PortClaim, Claim['verdict']][] = [
    ['no such port', undefined, hostClaim, 'create'],
    [
      'our host port for the same logical port',
      port({
        name: 'pf0hpf',
        role: 'host',
        externalIds: { 'hydrazine:role': 'host', 'iface-id': 'tenant-a-h1', 'attached-mac': 'x' },
      }),
      hostClaim,
      'keep',
    ],
    [
      'the uplink bridge (its own internal port)',
      port({ name: 'br-phy', bridge: 'br-phy' }),
      { ...hostClaim, name: 'br-phy' },
      'other-bridge',
    ],
    [
      'the uplink interface',
      port({ name: 'p0', bridge: 'br-phy' }),
      { ...hostClaim, name: 'p0' },
      'other-bridge',
    ],
    [
      "the integration bridge's own port",
      port({ name: 'br-int', bridge: 'br-int' }),
      { ...hostClaim, name: 'br-int' },
      'not-ours',
    ],
    [
      'a port of another bridge, even one Hydrazine made for a host',
      port({ name: 'pf0hpf', bridge: 'br-ext', role: 'host' }),
      hostClaim,
      'other-bridge',
    ],
    [
      'a port of br-int someone else made, with an iface-id',
      port({ name: 'pf0hpf', externalIds: { 'iface-id': 'tenant-a-h1' } }),
      hostClaim,
      'not-ours',
    ],
    [
      'a relay port asked for as a host port',
      port({ name: 'pf0hpf', role: 'dhcp-relay' }),
      hostClaim,
      'not-ours',
    ],
    [
      "our host port, bound to another host's logical port",
      port({
        name: 'pf0hpf',
        role: 'host',
        externalIds: { 'hydrazine:role': 'host', 'iface-id': 'tenant-b-h9' },
      }),
      hostClaim,
      'other-owner',
    ],
    [
      "another group's relay port",
      port({
        name: 'hzr0000002a',
        role: 'dhcp-relay',
        externalIds: { 'hydrazine:group': 'tenant-b' },
      }),
      relayClaim,
      'other-owner',
    ],
    [
      "the group's own relay port",
      port({
        name: 'hzr0000002a',
        role: 'dhcp-relay',
        externalIds: { 'hydrazine:group': 'tenant-a' },
      }),
      relayClaim,
      'keep',
    ],
    ['a port on no bridge', port({ name: 'pf0hpf', bridge: null }), hostClaim, 'other-bridge'],
  ]
  for (const [what, existing, want, verdict] of cases) {
    const claim = claimPort(existing, want)
    t.equal(claim.verdict, verdict, what)
    t.equal(granted(claim), verdict === 'create' || verdict === 'keep', `${what}: granted`)
  }
  const rebind = claimPort(
    port({ name: 'pf0hpf', role: 'host', externalIds: { 'iface-id': 'tenant-b-h9' } }),
    hostClaim,
  )
  t.match(rebind, { verdict: 'other-owner', key: 'iface-id', holder: 'tenant-b-h9' })
})
