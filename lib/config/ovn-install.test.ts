import t from 'tap'
import { ConfigError } from '../errors.ts'
import { loadConfig } from './index.ts'

t.test('HYDRAZINE_OVN_INSTALL: the OVN embedded centrals run', async (t) => {
  t.same(loadConfig({}).ovnInstall, { kind: 'system' }, 'default: the system OVN')
  t.same(loadConfig({ HYDRAZINE_OVN_INSTALL: 'debian-13' }).ovnInstall, {
    kind: 'debian-13',
    mirror: undefined,
  })
  t.same(
    loadConfig({
      HYDRAZINE_OVN_INSTALL: 'debian-13',
      HYDRAZINE_DEBIAN_MIRROR: 'http://mirror.example/debian',
      HYDRAZINE_OVN_CENTRAL: 'shared',
    }).ovnInstall,
    { kind: 'debian-13', mirror: 'http://mirror.example/debian' },
    'with a mirror, for the shared embedded central too',
  )
})

t.test('HYDRAZINE_OVN_INSTALL and HYDRAZINE_DEBIAN_MIRROR: what is refused', async (t) => {
  const external = { OVN_NB_DB: 'unix:/nb.sock', OVN_SB_DB: 'unix:/sb.sock' }
  const bad: [string, Record<string, string>, RegExp][] = [
    [
      'an unknown name',
      { HYDRAZINE_OVN_INSTALL: 'debian-12' },
      /HYDRAZINE_OVN_INSTALL: must be system, debian-13 or the absolute path of an OVN install root/,
    ],
    [
      'a relative path',
      { HYDRAZINE_OVN_INSTALL: 'opt/ovn' },
      /HYDRAZINE_OVN_INSTALL: must be system, debian-13 or the absolute path/,
    ],
    [
      'a root that is not there',
      { HYDRAZINE_OVN_INSTALL: '/nonexistent/ovn' },
      /HYDRAZINE_OVN_INSTALL: \/nonexistent\/ovn is not an OVN install: no such directory/,
    ],
    [
      'a root without OVN',
      { HYDRAZINE_OVN_INSTALL: '/tmp' },
      /HYDRAZINE_OVN_INSTALL: \/tmp is not an OVN install: no ovsdb-server, ovsdb-tool, ovn-northd/,
    ],
    [
      'with an external central',
      { ...external, HYDRAZINE_OVN_INSTALL: 'debian-13' },
      /HYDRAZINE_OVN_INSTALL: chooses the OVN of embedded centrals, and there is none: OVN_NB_DB names an external central/,
    ],
    [
      'with Kubernetes centrals',
      {
        HYDRAZINE_OVN_CENTRAL: 'kubernetes',
        HYDRAZINE_K8S_NAMESPACE: 'hz',
        HYDRAZINE_OVN_INSTALL: 'debian-13',
      },
      /HYDRAZINE_OVN_INSTALL: chooses the OVN of embedded centrals, and there is none: HYDRAZINE_OVN_CENTRAL=kubernetes runs none/,
    ],
    [
      'a mirror without debian-13',
      { HYDRAZINE_DEBIAN_MIRROR: 'http://mirror.example/debian' },
      /HYDRAZINE_DEBIAN_MIRROR: is where the debian-13 OVN root comes from: only with HYDRAZINE_OVN_INSTALL=debian-13, not system/,
    ],
    [
      'a mirror that is no URL',
      { HYDRAZINE_OVN_INSTALL: 'debian-13', HYDRAZINE_DEBIAN_MIRROR: 'ftp://mirror/debian' },
      /HYDRAZINE_DEBIAN_MIRROR: must be an http:\/\/ or https:\/\/ URL of a Debian archive/,
    ],
  ]
  for (const [name, env, message] of bad) {
    t.throws(() => loadConfig(env), ConfigError, name)
    t.throws(() => loadConfig(env), { message }, name)
  }
})
