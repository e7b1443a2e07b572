/**
 * The agent's notes (`agent/ovs.ts`) against a real OVS database: kept on the integration
 * bridge, on the Open_vSwitch row only while there is no such bridge, read from both (an
 * older agent's are on the row), moved to the bridge when written again, removed from both.
 */
import t from 'tap'
import { jobSentKey, LocalOvs, releasingKey } from '../../agent/ovs.ts'
import { run } from '../../infra/lab/dpu.ts'
import { startOvsdb } from '../ovn/ovsdb-fixture.ts'

t.test("the agent's notes", async (t) => {
  const server = await startOvsdb(t, '/usr/share/openvswitch/vswitch.ovsschema')
  const vsctl = async (...args: string[]) =>
    (await run('ovs-vsctl', [`--db=${server.unix}`, '--no-wait', ...args])).trim()
  await vsctl('init')
  const ovs = await LocalOvs.connect(server.unix, 'br-int')
  t.teardown(() => ovs.close())
  const row = () => vsctl('get', 'Open_vSwitch', '.', 'external_ids')
  const a = jobSentKey('hz/g/a')
  const b = releasingKey('hz/g/b')

  t.ok(await ovs.setNotes({ [a]: '1' }), 'written')
  t.match(await row(), `"${a}"="1"`, 'no bridge yet: on the Open_vSwitch row')
  t.same((await ovs.snapshot()).notes, { [a]: '1' }, 'and read back')
  t.notOk(await ovs.setNotes({ [a]: '1' }), 'the same again is no change')

  await ovs.ensureBridges([{ name: 'br-int', datapathType: 'netdev', failMode: 'secure' }])
  t.ok(await ovs.setNotes({ [b]: '["ssl:10.0.0.1:6642"]' }), 'another')
  t.equal(await vsctl('br-get-external-id', 'br-int', b), '["ssl:10.0.0.1:6642"]', 'on br-int')
  t.same(
    (await ovs.snapshot()).notes,
    { [a]: '1', [b]: '["ssl:10.0.0.1:6642"]' },
    "the row's and the bridge's read together",
  )

  t.ok(await ovs.setNotes({ [a]: '2' }), 'the older note written again')
  t.equal(await vsctl('br-get-external-id', 'br-int', a), '2', 'moved to br-int')
  t.notMatch(await row(), 'hydrazine:', 'and gone from the row')

  await vsctl('set', 'Open_vSwitch', '.', `external_ids:"${b}"="old"`)
  t.equal((await ovs.snapshot()).notes[b], '["ssl:10.0.0.1:6642"]', "the bridge's wins")
  t.ok(await ovs.removeNotes([a, b, jobSentKey('hz/g/none')]), 'removed')
  t.same((await ovs.snapshot()).notes, {}, 'from both')
  t.notMatch(await row(), 'hydrazine:', 'the row keeps none')
  t.notOk(await ovs.removeNotes([a]), 'removing what is not there is no change')

  await t.rejects(
    ovs.setNotes({ 'ovn-remote': 'tcp:1.2.3.4:6642' }),
    /ovn-remote is not a note of the agent/,
    "chassis settings are not the notes' to write",
  )
  t.notOk(await ovs.removeNotes(['system-id']), 'nor to remove')
})
