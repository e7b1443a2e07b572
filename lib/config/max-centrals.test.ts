import t from 'tap'
import { ConfigError } from '../errors.ts'
import { DEFAULT_CENTRAL_IDLE_MS, DEFAULT_MAX_CENTRALS, loadConfig } from './index.ts'

t.test('HYDRAZINE_MAX_CENTRALS bounds the centrals Hydrazine runs', async (t) => {
  t.equal(loadConfig({}).maxCentrals, DEFAULT_MAX_CENTRALS, 'per-group (embedded): a default')
  t.equal(loadConfig({ HYDRAZINE_MAX_CENTRALS: '12' }).maxCentrals, 12)
  const shared = loadConfig({ OVN_NB_DB: 'tcp:10.0.0.6:6641', OVN_SB_DB: 'tcp:10.0.0.6:6642' })
  t.equal(shared.maxCentrals, undefined, 'one shared central: no limit')

  for (const [value, message] of [
    ['0', /HYDRAZINE_MAX_CENTRALS: must be between 1 and 100000/],
    ['-3', /HYDRAZINE_MAX_CENTRALS: must be a whole number of OVN centrals/],
    ['ten', /HYDRAZINE_MAX_CENTRALS: must be a whole number of OVN centrals/],
    ['1e3', /HYDRAZINE_MAX_CENTRALS: must be a whole number of OVN centrals/],
  ] as const) {
    t.throws(() => loadConfig({ HYDRAZINE_MAX_CENTRALS: value }), message, value)
  }
  const error = (() => {
    try {
      loadConfig({
        HYDRAZINE_MAX_CENTRALS: '5',
        OVN_NB_DB: 'tcp:10.0.0.6:6641',
        OVN_SB_DB: 'tcp:10.0.0.6:6642',
      })
    } catch (e) {
      return e
    }
  })()
  t.type(error, ConfigError)
  t.match(
    (error as Error).message,
    /HYDRAZINE_MAX_CENTRALS: bounds the centrals Hydrazine runs, one per group: only with HYDRAZINE_OVN_CENTRAL=per-group or kubernetes, not shared/,
    'set where Hydrazine runs no central: refused, not ignored',
  )
})

t.test(
  "HYDRAZINE_CENTRAL_IDLE_MS: how long a group's central outlives its last host",
  async (t) => {
    t.equal(
      loadConfig({}).centralIdleMs,
      DEFAULT_CENTRAL_IDLE_MS,
      'per-group (embedded): a default',
    )
    t.equal(loadConfig({ HYDRAZINE_CENTRAL_IDLE_MS: '0' }).centralIdleMs, 0, 'at once')
    t.equal(loadConfig({ HYDRAZINE_CENTRAL_IDLE_MS: '120000' }).centralIdleMs, 120_000)
    t.equal(
      loadConfig({ HYDRAZINE_OVN_CENTRAL: 'shared' }).centralIdleMs,
      undefined,
      'shared: none',
    )
    for (const [value, message] of [
      ['-1', /HYDRAZINE_CENTRAL_IDLE_MS: must be a whole number of milliseconds/],
      ['30s', /HYDRAZINE_CENTRAL_IDLE_MS: must be a whole number of milliseconds/],
      ['86400001', /HYDRAZINE_CENTRAL_IDLE_MS: must be at most 86400000/],
    ] as const) {
      t.throws(() => loadConfig({ HYDRAZINE_CENTRAL_IDLE_MS: value }), message, value)
    }
    t.throws(
      () => loadConfig({ HYDRAZINE_CENTRAL_IDLE_MS: '1000', HYDRAZINE_OVN_CENTRAL: 'shared' }),
      /HYDRAZINE_CENTRAL_IDLE_MS: is how long a group's own central outlives its last host: only with HYDRAZINE_OVN_CENTRAL=per-group or kubernetes, not shared/,
      'set where Hydrazine runs no central of its own: refused, not ignored',
    )
  },
)
