/**
 * Work on one object runs one step at a time: an attach and a detach of the same host
 * that arrive together never leave it bound after its isolate, nor an address held after
 * its release; an apply that comes late to a deleting group leaves its rows removed.
 */
import t from 'tap'
import { deleteGroupTopology, OvsdbClient } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { pacedApplier } from './scenarios.ts'

t.test(
  'a DELETE that arrives while the attach is under way waits for it: isolated, nothing held',
  async (t) => {
    // Armed, the attach is held at `attach:status-configuring` — its addresses allocated,
    // its rows in OVN, its configure not yet sent — while the DELETE arrives, for up to 3 s
    // or until the detach has sent its own children (it should not get that far).
    let armed = false
    let detachSent = false
    const p: Pipeline = await startPipeline(t, {
      checkpoint: async (point) => {
        if (point === 'detach:children-added') detachSent = true
        if (!armed || point !== 'attach:status-configuring') return
        armed = false
        void p.client.deleteHost('host-x')
        const deadline = Date.now() + 3000
        while (!detachSent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
      },
    })
    const agent = await p.agent('dpu-1')
    await p.client.applyGroup('group-x', groupSpec())
    await p.client.applyHost('host-x', hostSpec('group-x', 'dpu-1', 1))
    await until(
      () => p.controller.store.hosts.get('host-x'),
      (h) => h?.status.phase === 'Ready',
    )

    armed = true
    await p.client.applyHost(
      'host-x',
      hostSpec('group-x', 'dpu-1', 1, { hostMAC: '52:54:00:00:09:10' }),
    )
    await until(
      () => p.controller.store.hosts.get('host-x'),
      (h) => h === undefined,
      30_000,
    )
    const actions = agent.jobs
      .filter((j) => (j.data as { host?: { name?: string } }).host?.name === 'host-x')
      .map((j) => `${j.name} v${(j.data as { specVersion?: number }).specVersion}`)
    t.equal(
      actions.at(-1),
      'isolate v2',
      `the DPU's last word on the host is isolate (${actions.join(', ')})`,
    )
    t.equal(await p.controller.ipam.lookup('group-x', 'host-x'), undefined, 'no address held')
    await p.client.deleteGroup('group-x')
    await until(
      () => p.controller.store.groups.get('group-x'),
      (g) => g === undefined,
      30_000,
    )
    t.pass('the group is not wedged in Terminating')
  },
)

t.test(
  "an apply that runs after a deleting group's last host left and its rows were removed writes nothing back",
  async (t) => {
    const p: Pipeline = await startPipeline(t)
    await p.client.applyGroup('group-late', groupSpec())
    await until(
      () => p.controller.store.groups.get('group-late'),
      (g) => g?.status.phase === 'Ready',
    )
    t.not(await p.ownedRows(), [], 'the Ready group has its base rows in NB')
    // What group.delete does once its hosts are gone: marks the group, removes its rows.
    await p.controller.store.objects.requestDeletion('rg', 'group-late', false)
    const nb = await OvsdbClient.connect(p.nb)
    t.teardown(() => nb.close())
    await deleteGroupTopology(nb, 'group-late')
    t.same(await p.ownedRows(), [], 'group.delete removed every row of the group')
    // A detach's apply of the group, queued before and running late.
    const groups = pacedApplier(t, p, 1000)
    await t.rejects(groups.apply('group-late'), { code: 'GROUP_GONE' })
    t.same(await p.ownedRows(), [], 'no row of the deleting group came back')
  },
)

t.test(
  "a DELETE that arrives while the group's create is under way waits for it: nothing of the group is left",
  async (t) => {
    // Armed, group.create is held at `create:defining-network` (before the group's IPAM
    // network and its rows are made) while the DELETE arrives, for up to 3 s or until the
    // delete has removed the group (it should not get that far).
    let armed = true
    const p: Pipeline = await startPipeline(t, {
      checkpoint: async (point) => {
        if (!armed || point !== 'create:defining-network') return
        armed = false
        await p.client.deleteGroup('group-racing')
        const deadline = Date.now() + 3000
        while (Date.now() < deadline && (await p.controller.store.groups.get('group-racing')))
          await new Promise((r) => setTimeout(r, 20))
      },
    })
    await p.client.applyGroup('group-racing', groupSpec())
    await until(
      () => p.controller.store.groups.get('group-racing'),
      (g) => g === undefined,
      30_000,
    )
    t.equal(await p.controller.ipam.getNetwork('group-racing'), undefined, 'no IPAM network left')
    t.same(await p.ownedRows(), [], 'no NB row left')
  },
)
