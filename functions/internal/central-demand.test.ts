import t from 'tap'
import type { ResourceGroupStatus } from '../../lib/model/objects.ts'
import type { OvnCentralEndpoints } from '../../lib/ovn/index.ts'
import { storedGroup } from '../../test/helpers/objects.ts'
import { CENTRAL_RUNNING, centralRunningStatus, noCentralStatus } from './central-demand.ts'

const ready: ResourceGroupStatus = storedGroup('g').status
const endpoints: OvnCentralEndpoints = {
  nb: 'unix:/d/nb.sock',
  sb: 'tcp:127.0.0.1:6642',
  sbController: 'unix:/d/sb.sock',
  service: 'central-g-1',
  group: 'g',
}
const condition = (s: ResourceGroupStatus | undefined) =>
  s?.conditions.find((c) => c.type === CENTRAL_RUNNING)

t.test('a group without hosts: CentralRunning=False NoHosts, no ovnCentral', async (t) => {
  const stopped = noCentralStatus({ ...ready, ovnCentral: { nb: 'x', sb: 'y' } }, 'g')
  t.match(condition(stopped), { status: 'False', reason: 'NoHosts' })
  t.match(condition(stopped)?.message, /g has no hosts: its OVN central is not running/)
  t.notOk(stopped && 'ovnCentral' in stopped, 'says no central')
  t.equal(stopped?.phase, 'Ready', 'still usable')
  t.equal(noCentralStatus(stopped ?? ready, 'g'), undefined, 'written once')
})

t.test('a group whose central runs: CentralRunning=True HasHosts and where it is', async (t) => {
  const running = centralRunningStatus(noCentralStatus(ready, 'g') ?? ready, endpoints)
  t.match(condition(running), { status: 'True', reason: 'HasHosts' })
  t.same(running?.ovnCentral, { nb: endpoints.nb, sb: endpoints.sb })
  t.equal(centralRunningStatus(running ?? ready, endpoints), undefined, 'written once')
  const moved = centralRunningStatus(running ?? ready, { ...endpoints, sb: 'tcp:127.0.0.1:7000' })
  t.same(moved?.ovnCentral?.sb, 'tcp:127.0.0.1:7000', 'a central that moved is written again')
})
