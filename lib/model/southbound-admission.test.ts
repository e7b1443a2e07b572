import t from 'tap'
import { admittedNatIpMessage, natIpsAdmitted } from './southbound-admission.ts'

t.test("a DPU's NAT addresses inside the CIDRs its groups' Southbounds admit", async (t) => {
  const encapOnly = ['172.18.0.0/26', 'fd00:fab::/120']
  t.same(
    natIpsAdmitted(
      { fabricIps: ['172.18.0.11', '172.18.0.111'], natIp6: 'fd00:fab::1:6f' },
      encapOnly,
    ),
    [],
    'encap inside, NAT addresses outside: nothing',
  )
  t.same(natIpsAdmitted({ fabricIps: ['172.18.0.11'] }, encapOnly), [], 'no NAT IP: nothing')
  t.same(
    natIpsAdmitted(
      { fabricIps: ['172.18.0.11', '172.18.0.40'], natIp6: 'fd00:fab::6f' },
      encapOnly,
    ),
    [
      { field: 'fabricIps[1]', ip: '172.18.0.40', cidr: '172.18.0.0/26' },
      { field: 'natIp6', ip: 'fd00:fab::6f', cidr: 'fd00:fab::/120' },
    ],
    'both NAT addresses inside: both, each with its CIDR',
  )
  t.match(
    admittedNatIpMessage({ field: 'fabricIps[1]', ip: '172.18.0.40', cidr: '172.18.0.0/26' }),
    /NAT address 172\.18\.0\.40 is inside 172\.18\.0\.0\/26, which HYDRAZINE_K8S_DPU_CIDRS admits/,
  )
})
