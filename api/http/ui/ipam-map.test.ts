import t from 'tap'
import { IpamMap, ipamCells, MAX_CELLS } from './ipam-map.tsx'

const pools = [{ name: 'default', start: '10.0.0.1', end: '10.0.0.6', size: 6, used: 1, free: 4 }]

t.test('a small subnet: one cell per address, with holder and pool', async (t) => {
  const { cells, more } = ipamCells(
    { cidr: '10.0.0.0/29', mapFormat: 'address', map: 'XX+...XX', pools },
    [{ owner: 'h1', ip: '10.0.0.2' }],
  )
  t.equal(more, 0)
  t.same(
    cells.map(
      (c) => `${c.first}:${c.state}${c.owner ? `:${c.owner}` : ''}${c.pool ? `@${c.pool}` : ''}`,
    ),
    [
      '10.0.0.0:reserved',
      '10.0.0.1:reserved@default',
      '10.0.0.2:used:h1@default',
      '10.0.0.3:free@default',
      '10.0.0.4:free@default',
      '10.0.0.5:free@default',
      '10.0.0.6:reserved@default',
      '10.0.0.7:reserved',
    ],
  )
})

t.test('a large subnet: one cell per run', async (t) => {
  const { cells } = ipamCells(
    { cidr: '2001:db8::/64', mapFormat: 'runs', map: 'X1.253+2-18446744073709551360', pools: [] },
    [],
  )
  t.same(
    cells.map((c) => [c.state, c.first, c.last, String(c.count)]),
    [
      ['reserved', '2001:db8::', '2001:db8::', '1'],
      ['free', '2001:db8::1', '2001:db8::fd', '253'],
      ['used', '2001:db8::fe', '2001:db8::ff', '2'],
      ['outside', '2001:db8::100', '2001:db8::ffff:ffff:ffff:ffff', '18446744073709551360'],
    ],
  )
})

t.test('runs beyond the cap are counted, not drawn', async (t) => {
  const map = '+1.1'.repeat(MAX_CELLS)
  const { cells, more } = ipamCells({ cidr: '10.0.0.0/12', mapFormat: 'runs', map, pools: [] }, [])
  t.equal(cells.length, MAX_CELLS)
  t.equal(more, MAX_CELLS)
})

t.test('the map as HTML: a legend, counts, a cell per address', async (t) => {
  const html = String(
    await IpamMap({
      usage: {
        network: 'group-a',
        subnets: [
          {
            cidr: '10.0.0.0/29',
            gateway: '10.0.0.1',
            dhcp: true,
            size: '8',
            used: 1,
            reserved: 4,
            free: 3,
            pools,
            external: [{ start: '10.0.0.6', end: '10.0.0.6' }],
            mapFormat: 'address',
            map: 'XX+...XX',
          },
        ],
        allocations: [{ owner: 'h1', ip: '10.0.0.2' }],
      },
    }),
  )
  t.equal(html.match(/<li class="cell /g)?.length, 8)
  t.match(html, /title="10\.0\.0\.2: used by h1, pool default"/)
  t.match(html, /Reservations: 10\.0\.0\.6/)
})
