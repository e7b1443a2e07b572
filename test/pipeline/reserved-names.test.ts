import t from 'tap'
import { groupSpec, hostSpec, startPipeline } from './fixtures.ts'

t.test("a host may not take the name of its group's router link ports", async (t) => {
  const p = await startPipeline(t)
  await p.client.applyGroup('group-r', groupSpec())
  for (const name of ['ls-lr', 'lr-ls']) {
    await t.rejects(
      p.client.applyHost(name, hostSpec('group-r', 'dpu-1', 1)),
      { code: 'INVALID', issues: [{ path: 'name', message: /reserved/ }] },
      `${name} is refused`,
    )
    t.equal(await p.controller.store.hosts.get(name), undefined, `${name}: nothing stored`)
  }
  const ports = await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port')
  t.notMatch(ports, /hz\/group-r\/lr-ls/, 'no host port shares the router port name')
})
