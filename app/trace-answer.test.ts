import t from 'tap'
import type { TraceVerdict } from '../lib/ovn/index.ts'
import { outcomeOf, summaryOf } from './trace-answer.ts'

t.test('each verdict: its details under its name, and one sentence', async (t) => {
  const cases: [TraceVerdict, RegExp][] = [
    [
      { verdict: 'delivered', port: 'hz/g/h2', host: 'h2', group: 'g' },
      /^h1 reaches host h2 of group g \(port hz\/g\/h2\)$/,
    ],
    [{ verdict: 'delivered', port: 'hz/g/relay/d1' }, /reaches port hz\/g\/relay\/d1 \(DHCP relay/],
    [{ verdict: 'answered', router: 'hz/g/lr' }, /is answered by group g router \(hz\/g\/lr\)/],
    [
      {
        verdict: 'dropped',
        datapath: 'hz/g/ls',
        stage: '9. ls_in_acl',
        match: 'ip',
        reason: 'an ACL drops it',
      },
      /is dropped by group g network \(hz\/g\/ls\) at stage 9\. ls_in_acl: an ACL drops it/,
    ],
    [
      { verdict: 'leaves', port: 'hz/g/dpu/d1/pub-ln', dpu: 'd1', source: '172.18.0.5' },
      /leaves for the fabric through DPU d1 localnet port \(the fabric\) as 172\.18\.0\.5$/,
    ],
    [
      {
        verdict: 'leaves',
        port: 'hz/g/dpu/d1/pub-ln',
        source: '172.18.0.5',
        arp: { target: '172.18.0.1', port: 'hz/g/dpu/d1/pub-ln' },
      },
      /as 172\.18\.0\.5, once an ARP request for 172\.18\.0\.1 .* is answered/,
    ],
    [
      { verdict: 'unresolved', target: '10.0.0.9', datapath: 'hz/g/ls', reached: [] },
      /is never sent: nothing on group g network .* answers the ARP request for 10\.0\.0\.9/,
    ],
    [
      { verdict: 'inconclusive', datapath: 'hz/g/lr', stage: '4. lr_in_unsnat', action: 'ct_snat' },
      /ovn-trace stops at group g router .* stage 4\. lr_in_unsnat \(ct_snat\)/,
    ],
  ]
  for (const [verdict, sentence] of cases) {
    const { verdict: name, ...details } = verdict
    t.same(outcomeOf(verdict), { verdict: name, [name]: details }, name)
    t.match(summaryOf('h1', '10.0.0.3', verdict), sentence, name)
  }
})
