import t from 'tap'
import { ConfigError } from '../errors.ts'
import { parseCentralsFile } from './centrals.ts'

const FILE = '/etc/hydrazine/centrals.json'

t.test('a centrals file maps each group to its remotes; sbController defaults to sb', async (t) => {
  const centrals = parseCentralsFile(
    JSON.stringify({
      'tenant-a': { nb: 'ssl:10.0.0.5:6641', sb: 'ssl:10.0.0.5:6642' },
      'tenant-b': {
        nb: 'tcp:[fd00::6]:6641',
        sb: 'tcp:[fd00::6]:6642',
        sbController: 'unix:/run/ovn-b/sb.sock',
      },
    }),
    FILE,
  )
  t.same(Object.fromEntries(centrals), {
    'tenant-a': {
      nb: 'ssl:10.0.0.5:6641',
      sb: 'ssl:10.0.0.5:6642',
      sbController: 'ssl:10.0.0.5:6642',
    },
    'tenant-b': {
      nb: 'tcp:[fd00::6]:6641',
      sb: 'tcp:[fd00::6]:6642',
      sbController: 'unix:/run/ovn-b/sb.sock',
    },
  })
  t.equal(parseCentralsFile('{}', FILE).size, 0, 'an empty file names no central yet')
})

const bad: [string, string, RegExp][] = [
  [
    'not JSON',
    '{"tenant-a": ',
    /^HYDRAZINE_OVN_CENTRALS_FILE: \/etc\/hydrazine\/centrals\.json: not JSON/,
  ],
  ['an array', '[]', /centrals\.json: must hold a JSON object: resource group name → /],
  ['a string', '"tcp:10.0.0.5:6641"', /centrals\.json: must hold a JSON object/],
  [
    'a remote without its scheme',
    '{"tenant-a": {"nb": "10.0.0.5:6641", "sb": "tcp:10.0.0.5:6642"}}',
    /centrals\.json: tenant-a\.nb: must be an OVSDB remote: unix:\/path, tcp:HOST:PORT or ssl:HOST:PORT$/,
  ],
  [
    'a port out of range',
    '{"tenant-a": {"nb": "tcp:10.0.0.5:6641", "sb": "ssl:10.0.0.5:70000"}}',
    /centrals\.json: tenant-a\.sb: must be an OVSDB remote whose port is 1\.\.65535$/,
  ],
  [
    'a relative unix socket',
    '{"tenant-a": {"nb": "unix:nb.sock", "sb": "tcp:10.0.0.5:6642"}}',
    /tenant-a\.nb: must be an OVSDB remote/,
  ],
  [
    'a missing SB',
    '{"tenant-a": {"nb": "tcp:10.0.0.5:6641"}}',
    /centrals\.json: tenant-a\.sb: is required$/,
  ],
  [
    'a remote that is not a string',
    '{"tenant-a": {"nb": "tcp:10.0.0.5:6641", "sb": 6642}}',
    /tenant-a\.sb: must be an OVSDB remote/,
  ],
  [
    'a misspelt field',
    '{"tenant-a": {"nb": "tcp:10.0.0.5:6641", "sb": "tcp:10.0.0.5:6642", "sbcontroller": "unix:/sb"}}',
    /tenant-a\.sbcontroller: is not a field \(an entry is \{"nb": REMOTE, "sb": REMOTE, "sbController"\?: REMOTE\}\)$/,
  ],
  ['an entry that is a remote', '{"tenant-a": "tcp:10.0.0.5:6641"}', /tenant-a: must be an object/],
  [
    'a name that is no group name',
    '{"Tenant_A": {"nb": "tcp:10.0.0.5:6641", "sb": "tcp:10.0.0.5:6642"}}',
    /centrals\.json: group name Tenant_A: must be an RFC 1123 label/,
  ],
  [
    'two groups in one SB',
    JSON.stringify({
      'tenant-a': { nb: 'tcp:10.0.0.5:6641', sb: 'tcp:10.0.0.5:6642' },
      'tenant-b': { nb: 'tcp:10.0.0.6:6641', sb: 'tcp:10.0.0.5:6642' },
    }),
    /centrals\.json: tenant-b\.sb: is group tenant-a's SB too: each group needs a central of its own/,
  ],
]
for (const [name, text, message] of bad) {
  t.test(`a bad centrals file is refused, naming the group and field: ${name}`, async (t) => {
    const error = (() => {
      try {
        parseCentralsFile(text, FILE)
      } catch (e) {
        return e
      }
    })()
    t.type(error, ConfigError)
    t.match((error as Error).message, message)
  })
}

t.test('every bad field is named at once', async (t) => {
  const text = '{"tenant-a": {"nb": "x"}, "tenant-b": {"nb": "tcp:h:1", "sb": "tcp:h:0"}}'
  const error = (() => {
    try {
      parseCentralsFile(text, FILE)
    } catch (e) {
      return e
    }
  })()
  t.same(
    (error as ConfigError).issues.map((i) => i.path),
    ['tenant-a.nb', 'tenant-a.sb', 'tenant-b.sb'],
  )
  t.match((error as ConfigError).issues, [
    { message: /must be an OVSDB remote/ },
    { message: 'is required' },
    { message: /port is 1\.\.65535/ },
  ])
})
