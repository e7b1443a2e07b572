import t from 'tap'
import { COMMIT_PACE, commitDelayMs, paceOf } from './group-apply.ts'

const pace = { floorMs: 20, ceilingMs: 3000, northdShare: 0.25 }

t.test(
  'a central alone waits lag / northdShare after its commit, within floor and ceiling',
  async (t) => {
    t.equal(commitDelayMs(pace, 100), 400)
    t.equal(commitDelayMs(pace, 1), 20, 'the floor')
    t.equal(commitDelayMs(pace, 5000), 3000, 'the ceiling')
    t.equal(commitDelayMs(COMMIT_PACE, 100), 100 / COMMIT_PACE.northdShare)
  },
)

t.test(
  'busy centrals sharing northd cores wait in proportion to how many share them',
  async (t) => {
    t.equal(
      commitDelayMs(pace, 50, { busyCentrals: 10, northdCpus: 1 }),
      2000,
      'ten busy centrals on one core: each asks for a tenth of it',
    )
    t.equal(commitDelayMs(pace, 50, { busyCentrals: 10, northdCpus: 2 }), 1000)
    t.equal(
      commitDelayMs(pace, 50, { busyCentrals: 2, northdCpus: 4 }),
      200,
      'fewer busy centrals than cores: as if alone',
    )
    t.equal(
      commitDelayMs(pace, 200, { busyCentrals: 10, northdCpus: 1 }),
      3000,
      'still the ceiling',
    )
  },
)

t.test('centrals with CPU of their own are paced as if alone', async (t) => {
  t.equal(commitDelayMs(pace, 50, { busyCentrals: 10 }), 200)
  t.equal(commitDelayMs(pace, 50, { busyCentrals: 10, northdCpus: 0 }), 200)
})

t.test(
  'an ovn-northd that processes attaches incrementally is followed, not spaced out',
  async (t) => {
    t.equal(paceOf(pace, '25.03.0').northdShare, 1, '25.03: the next commit once it caught up')
    t.equal(paceOf(pace, '23.09.1').northdShare, 1, 'from 23.09')
    t.equal(paceOf(pace, '23.03.1').northdShare, 0.25, '23.03: recomputes, paced')
    t.equal(paceOf(pace, undefined).northdShare, 0.25, 'unknown: as 23.03')
    const crowd = { busyCentrals: 10, northdCpus: 1 }
    t.equal(commitDelayMs(paceOf(pace, '25.03.0'), 50, crowd, '25.03.0'), 50, 'no crowd stretch')
    t.equal(commitDelayMs(paceOf(pace, '23.03.1'), 50, crowd, '23.03.1'), 2000)
    t.equal(commitDelayMs(paceOf(pace, '25.03.0'), 5, crowd, '25.03.0'), 20, 'still the floor')
  },
)

t.test(
  "with its ovn-northd's CPU measured, a central waits what northd spent, not its lag",
  async (t) => {
    const crowd = { busyCentrals: 20, northdCpus: 2 }
    t.equal(
      commitDelayMs(pace, 30, crowd, '23.03.1', 12),
      120,
      "12 ms of northd's CPU, ten centrals per core: 120 ms, not ten times its lag (30 ms) over its share",
    )
    t.equal(
      commitDelayMs(pace, 30, crowd, '23.03.1'),
      1200,
      'unmeasured: its lag over its share, as before',
    )
    t.equal(
      commitDelayMs(pace, 30, { busyCentrals: 1 }, '23.03.1', 12),
      120,
      'alone: its lag over its share, as before (one northd is not asked more often)',
    )
    t.equal(
      commitDelayMs(pace, 30, { busyCentrals: 1, northdCpus: 1 }, '23.03.1', 900),
      120,
      'nor held back by the work its chassis give it while it has the cores to itself',
    )
    t.equal(
      commitDelayMs(pace, 3, crowd, '23.03.1', 4),
      40,
      'crowded, a short lag: the CPU the crowd shares',
    )
    t.equal(commitDelayMs(pace, 30, crowd, '23.03.1', 900), 3000, 'still the ceiling')
    t.equal(
      commitDelayMs(paceOf(pace, '25.03.0'), 30, crowd, '25.03.0', 12),
      30,
      'an incremental northd is followed by its lag',
    )
  },
)
