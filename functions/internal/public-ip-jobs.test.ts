import t from 'tap'
import * as v from 'valibot'
import { PublicIpJob, PublicIpReleaseJob } from '../../lib/jobs/index.ts'
import { storedHost } from '../../test/helpers/objects.ts'
import { natAddressesOf } from './public-ip-jobs.ts'

const host = storedHost('host-p', {
  hostAccess: 'PublicAccess',
  dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'], natIp6: 'fd00:18::111' },
})

t.test("a public IP job's next hops are the host's own DPU's, from the store", async (t) => {
  t.same(natAddressesOf(host, [4]), { natIp: '172.18.0.111' }, 'its NAT IP, not its encap IP')
  t.same(natAddressesOf(host, [4, 6]), { natIp: '172.18.0.111', natIp6: 'fd00:18::111' })
  t.same(natAddressesOf(host, [6]), { natIp6: 'fd00:18::111' })
  const noNat6 = storedHost('host-q', {
    dpu: { id: 'dpu-2', ips: ['172.18.0.12', '172.18.0.112'] },
  })
  t.equal(natAddressesOf(noNat6, [6]), "host host-q's DPU dpu-2 has no IPv6 NAT address")
  const noNat = storedHost('host-r', { dpu: { id: 'dpu-3', ips: ['172.18.0.13'] } })
  t.equal(natAddressesOf(noNat, [4]), "host host-r's DPU dpu-3 has no NAT IP")
})

t.test(
  'publicip payloads name the host and families; old ones keep only their families',
  async (t) => {
    t.same(v.parse(PublicIpJob, { host: 'host-p', specVersion: 2, families: [4, 6] }), {
      host: 'host-p',
      specVersion: 2,
      families: [4, 6],
    })
    // Queued by an earlier version: the addresses are dropped, the families they stood for kept.
    t.same(
      v.parse(PublicIpJob, { host: 'host-p', specVersion: 2, natIp: '198.51.100.66' }),
      { host: 'host-p', specVersion: 2, families: [4] },
      'a natIp of an old payload is ignored',
    )
    t.same(
      v.parse(PublicIpJob, { host: 'host-p', specVersion: 2, natIp6: 'fd00::66' }).families,
      [6],
    )
    const missing = v.safeParse(PublicIpJob, { host: 'host-p', specVersion: 2 })
    t.same(
      missing.issues?.map((i) => `${v.getDotPath(i)}: ${i.message}`),
      ['families: families is required'],
    )
    t.same(
      v.parse(PublicIpReleaseJob, { host: 'host-p', specVersion: 2, natIp: '198.51.100.66' }),
      { host: 'host-p', specVersion: 2 },
      "an old release's natIp is ignored: the next hop comes from the store",
    )
    t.notOk(v.safeParse(PublicIpJob, { host: 'host-p', specVersion: 2, families: [] }).success)
    t.notOk(
      v.safeParse(PublicIpJob, { host: 'host-p', specVersion: 2, families: [4], nextHop: 'x' })
        .success,
      'no other field',
    )
  },
)
