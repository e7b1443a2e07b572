import t from 'tap'
import { publicIpOf } from './public-ips.ts'

t.test('a pool entry as operators read it', async (t) => {
  const cases: [string, Parameters<typeof publicIpOf>[0], ReturnType<typeof publicIpOf>][] = [
    ['free', { ip: '203.0.113.5', allocated: false }, { ip: '203.0.113.5', allocated: false }],
    [
      "a host's: named",
      { ip: '203.0.113.5', allocated: true, allocatedTo: 'h1' },
      { ip: '203.0.113.5', allocated: true, allocatedTo: 'h1' },
    ],
    [
      "held for a DPU's pending isolation: that DPU and host, not the hold's owner name",
      { ip: '2001:db8:ff::5', allocated: true, allocatedTo: 'dpu:dpu-1:isolates:h1:4' },
      {
        ip: '2001:db8:ff::5',
        allocated: true,
        heldUntilIsolatedBy: { dpu: 'dpu-1', host: 'h1' },
      },
    ],
  ]
  for (const [name, entry, listed] of cases) t.strictSame(publicIpOf(entry), listed, name)
})
