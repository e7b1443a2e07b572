import t from 'tap'
import {
  buildConfigurePayload,
  type ConfigureAck,
  PROTOCOL_VERSIONS,
  parseAgentJob,
} from '../../lib/agent-protocol/index.ts'
import { storedGroup, storedHost } from '../../test/helpers/objects.ts'
import { agentConfigured, configureRequestOf } from './host-configure.ts'

const context = { sbRemote: 'ssl:172.18.0.1:6642', relayIp: undefined, relayId: undefined }
const host = storedHost('h1', { identifier: 'pf0hpf' })
const group = storedGroup()

t.test("HYDRAZINE_GENEVE_IPSEC reaches the DPU in every protocol's configure", async (t) => {
  for (const version of PROTOCOL_VERSIONS) {
    const on = buildConfigurePayload(
      version,
      configureRequestOf(host, group, { ...context, geneveIpsec: true }),
    )
    t.equal(on.group.geneveIpsec, true, `${version}: asked for`)
    const parsed = parseAgentJob('configure', on)
    t.equal(
      parsed.name === 'configure' && parsed.payload.group.geneveIpsec,
      true,
      `${version}: the agent reads it`,
    )
    const off = buildConfigurePayload(version, configureRequestOf(host, group, context))
    t.notOk('geneveIpsec' in off.group, `${version}: not asked for, not sent`)
  }
  t.throws(
    () =>
      parseAgentJob('configure', {
        ...buildConfigurePayload('2.0', configureRequestOf(host, group, context)),
        group: { name: 'group-a', sbRemote: 'ssl:172.18.0.1:6642', geneveIpsec: 'yes' },
      }),
    { code: 'AGENT_PAYLOAD_INVALID', message: /group\.geneveIpsec/ },
    'a payload that says something else than true or false is refused, naming the field',
  )
})

t.test('a host asked for IPsec is configured only once its DPU acks IPsec', async (t) => {
  const ack = (
    geneveIpsec?: boolean,
  ): Pick<ConfigureAck, 'ovnInstalled' | 'hostPort' | 'geneveIpsec'> => ({
    ovnInstalled: true,
    hostPort: 'pf0hpf',
    ...(geneveIpsec === undefined ? {} : { geneveIpsec }),
  })
  const cases: [string, boolean, boolean | undefined, string, string][] = [
    ['not asked, not acked', false, undefined, 'True', 'PortInstalled'],
    ['asked and acked', true, true, 'True', 'PortInstalled'],
    ['asked, an older agent that drops it', true, undefined, 'False', 'GeneveIpsecNotConfigured'],
    ['asked, acked false', true, false, 'False', 'GeneveIpsecNotConfigured'],
  ]
  for (const [name, asked, acked, status, reason] of cases) {
    const condition = agentConfigured(ack(acked), true, 'dpu-1', 'lp', asked)
    t.match(condition, { type: 'AgentConfigured', status, reason }, name)
  }
})
