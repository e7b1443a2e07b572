import t from 'tap'
import { type OvnCentralEndpoints, OvnControllerTooOld } from '../../lib/ovn/central.ts'
import { controllerKeepsUpWithNorthd } from './dpu-central.ts'

const central = (northdVersion?: string): OvnCentralEndpoints => ({
  nb: 'unix:/nb.sock',
  sb: 'tcp:127.0.0.1:6642',
  sbController: 'unix:/sb.sock',
  service: 'central-g',
  group: 'g',
  ...(northdVersion ? { northdVersion } : {}),
})
const agents = (ovnVersion?: string) => ({
  agents: {
    protocolFor: async () => '2.0' as const,
    ovnVersionOf: async () => ovnVersion,
    speaksFabric: async () => false,
    speaksFabricAccess: async () => false,
    identityOf: async () => undefined,
  },
})

t.test("a DPU's ovn-controller may not be of an older OVN release than its northd", async (t) => {
  const cases: [string, string | undefined, string | undefined, boolean][] = [
    ['same release', '23.03.1', '23.03.1', true],
    ['same release, another patch level', '23.03.0', '23.03.1', true],
    ['controller newer (the upgrade order OVN supports)', '25.03.0', '23.03.1', true],
    ['controller older than a 25.03 northd', '23.03.1', '25.03.0', false],
    ['controller version not reported', undefined, '25.03.0', true],
    ['northd version unknown (a central Hydrazine does not run)', '23.03.1', undefined, true],
  ]
  for (const [name, controller, northd, passes] of cases) {
    const check = controllerKeepsUpWithNorthd(agents(controller), central(northd), 'g', 'dpu-1')
    if (passes) await t.resolves(check, name)
    else {
      await t.rejects(check, OvnControllerTooOld, name)
      await t.rejects(
        controllerKeepsUpWithNorthd(agents(controller), central(northd), 'g', 'dpu-1'),
        {
          code: 'OVN_CONTROLLER_TOO_OLD',
          retryable: false,
          message:
            /DPU dpu-1's ovn-controller 23\.03\.1 is older than group g's ovn-northd 25\.03\.0/,
        },
        `${name}: says which and why`,
      )
    }
  }
})
