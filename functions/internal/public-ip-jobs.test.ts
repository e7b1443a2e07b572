import t from 'tap'
import { storedHost } from '../../test/helpers/objects.ts'
import { natMismatch } from './public-ip-jobs.ts'

const host = storedHost('host-p', {
  hostAccess: 'PublicAccess',
  dpu: { id: 'dpu-1', ips: ['172.18.0.11', '172.18.0.111'], natIp6: 'fd00:18::111' },
})

t.test("a public IP job's NAT addresses must be the host's own DPU's", async (t) => {
  t.equal(natMismatch(host, { natIp: '172.18.0.111' }), undefined, 'its NAT IP')
  t.equal(natMismatch(host, { natIp: '172.18.0.111', natIp6: 'fd00:18::111' }), undefined)
  t.equal(natMismatch(host, {}), undefined, 'none named: nothing to announce')
  t.equal(
    natMismatch(host, { natIp: '198.51.100.66' }),
    "natIp 198.51.100.66 is not host host-p's: its DPU dpu-1 has 172.18.0.111",
  )
  t.equal(
    natMismatch(host, { natIp: '172.18.0.11' }),
    "natIp 172.18.0.11 is not host host-p's: its DPU dpu-1 has 172.18.0.111",
    "the DPU's encap IP is not its NAT IP",
  )
  t.match(
    natMismatch(host, { natIp: '172.18.0.111', natIp6: 'fd00::66' }),
    /^natIp6 fd00::66 is not/,
  )
  const noNat6 = storedHost('host-q', {
    dpu: { id: 'dpu-2', ips: ['172.18.0.12', '172.18.0.112'] },
  })
  t.equal(
    natMismatch(noNat6, { natIp6: 'fd00::66' }),
    "natIp6 fd00::66 is not host host-q's: its DPU dpu-2 has none",
  )
})
