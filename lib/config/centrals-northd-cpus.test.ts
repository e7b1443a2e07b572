import t from 'tap'
import { loadConfig } from './index.ts'

t.test('HYDRAZINE_CENTRALS_NORTHD_CPUS: the cores the embedded centrals share', async (t) => {
  t.equal(
    loadConfig({}).centralsNorthdCpus,
    undefined,
    'unset: the centrals choose (half the machine)',
  )
  t.equal(loadConfig({ HYDRAZINE_CENTRALS_NORTHD_CPUS: '1.5' }).centralsNorthdCpus, 1.5)
  t.equal(loadConfig({ HYDRAZINE_CENTRALS_NORTHD_CPUS: '8' }).centralsNorthdCpus, 8)
  for (const [value, message] of [
    ['0', /HYDRAZINE_CENTRALS_NORTHD_CPUS: must be more than 0 and at most 4096/],
    ['-1', /HYDRAZINE_CENTRALS_NORTHD_CPUS: must be a number of CPU cores, like 1 or 1.5/],
    ['two', /HYDRAZINE_CENTRALS_NORTHD_CPUS: must be a number of CPU cores/],
    ['5000', /HYDRAZINE_CENTRALS_NORTHD_CPUS: must be more than 0 and at most 4096/],
  ] as const) {
    t.throws(() => loadConfig({ HYDRAZINE_CENTRALS_NORTHD_CPUS: value }), message, value)
  }
  t.throws(
    () =>
      loadConfig({
        HYDRAZINE_CENTRALS_NORTHD_CPUS: '2',
        OVN_NB_DB: 'tcp:10.0.0.6:6641',
        OVN_SB_DB: 'tcp:10.0.0.6:6642',
      }),
    /HYDRAZINE_CENTRALS_NORTHD_CPUS: paces the embedded centrals that share this machine: only with HYDRAZINE_OVN_CENTRAL=per-group, not shared/,
    'set where Hydrazine runs no embedded central: refused, not ignored',
  )
})
