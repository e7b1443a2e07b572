import t from 'tap'
import { labDpuAddresses, maxLabDpus } from './addresses.ts'

t.test('the lab fabric plan: no two DPUs share an address, none is the router', async (t) => {
  for (const relays of [1, 2, 4]) {
    const dpus = maxLabDpus(relays)
    const seen = new Set<string>()
    for (let i = 1; i <= dpus; i++) {
      const { natIp, relayUplinkIps } = labDpuAddresses('100.64.1', i, dpus, relays)
      t.equal(relayUplinkIps.length, relays)
      for (const ip of [natIp, ...relayUplinkIps.map((c) => c.replace('/24', ''))]) {
        const host = Number(ip.split('.')[3])
        if (seen.has(ip) || host === 200 || host >= 250 || host <= 100) {
          t.fail(`${relays} relays, DPU ${i}: ${ip} is taken or reserved`)
        }
        seen.add(ip)
      }
    }
    t.equal(seen.size, dpus * (relays + 1), `${dpus} DPUs with ${relays} relay(s) each fit`)
    t.throws(
      () => labDpuAddresses('100.64.1', 1, dpus + 1, relays),
      /holds at most/,
      'one more is refused',
    )
  }
  t.equal(maxLabDpus(4), 24)
  t.equal(maxLabDpus(1), 49)
  t.same(labDpuAddresses('100.64.1', 3, 20, 1), {
    natIp: '100.64.1.103',
    natIp6: 'fd00:fab::67',
    relayUplinkIps: ['100.64.1.152/24'],
  })
})
