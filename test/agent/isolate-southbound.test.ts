/**
 * An isolate ack says `unbound` only when every Southbound that may bind the host's
 * logical port to this chassis said it does not: the SB the port was bound through, even
 * once ovn-controller follows none (its `ovn-remote` cleared) or the port is gone. One
 * that cannot be asked, or still binds the port, fails the job retryably
 * (`AGENT_PORT_NOT_RELEASED`), and a retry asks it again.
 */
import type { Job } from 'bullmq'
import t, { type Test } from 'tap'
import { startAgentRuntime } from '../../agent/runtime.ts'
import {
  agentJobId,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
  type IsolateAck,
} from '../../lib/agent-protocol/index.ts'
import { freePort } from '../../lib/process/ports.ts'
import { startAgentLab } from './fixture.ts'

t.test('an isolate never acks unbound on the word of an SB it could not ask', async (t) => {
  const lab = await startAgentLab(t)
  const logs: string[] = []
  const runtime = await startAgentRuntime(lab.config({ installTimeoutMs: 6000 }), (line) =>
    logs.push(line),
  )
  lab.later(() => runtime.stop())
  const lp = lab.input.host.logicalPort
  const hostPort = lab.host.hostPort
  let specVersion = 0

  const configure = async (t: Test) => {
    specVersion++
    const payload = buildConfigurePayload('2.0', { ...lab.input, specVersion })
    const job = (await lab.queue.add('configure', payload, {
      jobId: agentJobId('configure', payload),
    })) as Job<unknown, ConfigureAck>
    const ack = (await job.waitUntilFinished(lab.events, 40_000)) as ConfigureAck
    t.equal(ack.ovnInstalled, true, `configured (v${specVersion})`)
    t.equal(await lab.boundChassis(lp), lab.dpuId, 'the SB binds the host to this chassis')
  }
  let isolates = 0
  const isolate = async (): Promise<IsolateAck> => {
    const payload = buildIsolatePayload('2.0', {
      dpuId: lab.dpuId,
      specVersion,
      group: { name: lab.input.group.name },
      host: { name: 'h1', logicalPort: lp, hostPort },
    })
    const job = await lab.queue.add('isolate', payload, {
      jobId: agentJobId('isolate', payload, ++isolates),
    })
    return (await job.waitUntilFinished(lab.events, 40_000)) as IsolateAck
  }
  // ovn-controller follows no SB any more: nothing unbinds the port from this chassis.
  const forgetRemote = () =>
    lab.dpu.vsctl('remove', 'Open_vSwitch', '.', 'external_ids', 'ovn-remote')
  const notReleased = /AGENT_PORT_NOT_RELEASED|an SB still binds .* or could not be asked/

  await t.test('the SB it was bound through is unreachable', async (t) => {
    await configure(t)
    const down = `tcp:127.0.0.1:${await freePort()}`
    // As if the port had been bound through an SB that is down now.
    await lab.dpu.vsctl(
      'set',
      'Interface',
      hostPort,
      `external_ids:"hydrazine:sb-remote"="${down}"`,
    )
    await forgetRemote()
    await t.rejects(isolate(), notReleased, 'no ack: the SB could not be asked')
    t.notMatch(await lab.dpu.vsctl('list-ports', 'br-int'), hostPort, 'the port is gone anyway')
    t.match(logs.join('\n'), `cannot check southbound ${down}`)
    await t.rejects(isolate(), notReleased, 'a retry, with the port already gone, asks it again')
  })

  await t.test('the SB it was bound through still binds it', async (t) => {
    await configure(t)
    await forgetRemote()
    await t.rejects(isolate(), notReleased, 'no ack while the SB binds it to this chassis')
    t.equal(await lab.boundChassis(lp), lab.dpuId, 'as the SB says')

    await lab.sbctl('lsp-unbind', lp)
    const ack = await isolate()
    t.equal(ack.unbound, true, 'unbound once that SB says so')
    t.notMatch(
      `${await lab.dpu.vsctl('get', 'Open_vSwitch', '.', 'external_ids')} ${await lab.dpu.vsctl('br-get-external-id', 'br-int')}`,
      'hydrazine:releasing',
      'and nothing is left to ask',
    )
  })
})
