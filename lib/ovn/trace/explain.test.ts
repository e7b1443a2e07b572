import { readFileSync } from 'node:fs'
import t from 'tap'
import { describeDatapath, describePort, explain, type TraceVerdict } from './explain.ts'
import { parseTrace } from './parse.ts'

/** Real `ovn-trace` (OVN 23.03) output, captured against a compiled two-group topology. */
const fixture = (name: string) =>
  parseTrace(readFileSync(new URL(`./fixtures/${name}.txt`, import.meta.url), 'utf8'))

t.test('verdicts', async (t) => {
  const cases: [string, TraceVerdict][] = [
    ['host-to-host', { verdict: 'delivered', port: 'hz/alpha/h2', host: 'h2', group: 'alpha' }],
    [
      'outside-snat-tcp',
      {
        verdict: 'leaves',
        port: 'hz/alpha/dpu/dpu-1/pub-ln',
        dpu: 'dpu-1',
        source: '203.0.113.10',
      },
    ],
    [
      'outside-arp',
      {
        verdict: 'leaves',
        port: 'hz/alpha/dpu/dpu-1/pub-ln',
        dpu: 'dpu-1',
        arp: { target: '172.18.0.1', port: 'hz/alpha/dpu/dpu-1/pub-ln' },
      },
    ],
    [
      'port-security-drop',
      {
        verdict: 'dropped',
        datapath: 'hz/alpha/ls',
        stage: '1. ls_in_apply_port_sec',
        match: 'reg0[15] == 1',
        reason: "port security: its source MAC or address is not the port's own",
      },
    ],
    [
      'no-route-drop',
      {
        verdict: 'dropped',
        datapath: 'hz/beta/dpu/dpu-3/gw',
        stage: '13. lr_in_ip_routing',
        match: '1',
        reason: 'the router has no route to its destination',
      },
    ],
    [
      'inbound-unsnat',
      {
        verdict: 'inconclusive',
        datapath: 'hz/alpha/dpu/dpu-1/gw',
        stage: '4. lr_in_unsnat',
        action: 'ct_snat',
      },
    ],
    ['inbound-to-host', { verdict: 'delivered', port: 'hz/alpha/h1', host: 'h1', group: 'alpha' }],
    ['router-answers', { verdict: 'answered', router: 'hz/alpha/lr' }],
  ]
  for (const [name, verdict] of cases) t.same(explain(fixture(name)).verdict, verdict, name)
})

t.test('hops, in plain words', async (t) => {
  t.same(explain(fixture('host-to-host')).hops, [
    'group alpha network (hz/alpha/ls): host h1 port → host h2 port',
  ])
  t.same(explain(fixture('outside-snat-tcp')).hops, [
    'group alpha network (hz/alpha/ls): host h1 port → router port',
    'group alpha router (hz/alpha/lr): router port → router port to DPU dpu-1',
    'transit switch to DPU dpu-1 (hz/alpha/dpu/dpu-1/ts): router port to DPU dpu-1 → gateway router port on DPU dpu-1',
    'DPU dpu-1 gateway router (hz/alpha/dpu/dpu-1/gw): the source becomes 203.0.113.10 (SNAT)',
    'DPU dpu-1 gateway router (hz/alpha/dpu/dpu-1/gw): transit port on DPU dpu-1 → fabric port on DPU dpu-1',
    'DPU dpu-1 public switch (hz/alpha/dpu/dpu-1/pub): in from gateway router port on DPU dpu-1, floods it to every port (_MC_unknown)',
    'DPU dpu-1 public switch (hz/alpha/dpu/dpu-1/pub): from gateway router port on DPU dpu-1 → DPU dpu-1 localnet port (the fabric)',
  ])
  t.same(explain(fixture('outside-arp')).hops.slice(3, 5), [
    'DPU dpu-1 gateway router (hz/alpha/dpu/dpu-1/gw): does not know the MAC of 172.18.0.1; sends an ARP request for it instead',
    'DPU dpu-1 gateway router (hz/alpha/dpu/dpu-1/gw): transit port on DPU dpu-1 → fabric port on DPU dpu-1',
  ])
  t.same(explain(fixture('arp-unanswered')).hops, [
    'group beta network (hz/beta/ls): in from host h1 port, floods it to every port (_MC_flood)',
    'group beta network (hz/beta/ls): from host h1 port → host h2 port',
    'group beta network (hz/beta/ls): from host h1 port → router port',
    'group beta router (hz/beta/lr): in from router port',
    'group beta router (hz/beta/lr): dropped at stage 3. lr_in_ip_input (arp || nd)',
  ])
  t.same(explain(fixture('port-security-drop')).hops, [
    'group alpha network (hz/alpha/ls): in from host h1 port',
    'group alpha network (hz/alpha/ls): dropped at stage 1. ls_in_apply_port_sec (reg0[15] == 1)',
  ])
  t.same(explain(fixture('inbound-unsnat')).hops.slice(-2), [
    'DPU dpu-1 gateway router (hz/alpha/dpu/dpu-1/gw): in from fabric port on DPU dpu-1',
    'DPU dpu-1 gateway router (hz/alpha/dpu/dpu-1/gw): ovn-trace stops at stage 4. lr_in_unsnat (ct_snat)',
  ])
})

t.test('names in plain words, and names that are not ours as they are', async (t) => {
  t.equal(describeDatapath('hz/g/dpu/d/gw'), 'DPU d gateway router (hz/g/dpu/d/gw)')
  t.equal(describeDatapath('operator-ls'), 'operator-ls')
  t.equal(describePort('hz/g/relay/d'), 'DHCP relay port on DPU d')
  t.equal(describePort('operator-port'), 'operator-port')
})

t.test('a security-policy ACL drops the packet (ct_commit without next)', async (t) => {
  const trace = fixture('acl-drop')
  t.match(explain(trace).verdict, {
    verdict: 'dropped',
    datapath: 'hz/group-a/ls',
    stage: '4. ls_out_acl',
    match: /outport == @hz_[0-9a-f]{16}_t_deny_h1/,
    reason: 'an ACL drops it',
  })
  t.match(explain(trace).hops.at(-1), /dropped at stage 4\. ls_out_acl/)
})
