/**
 * Per-group DNS on the simulated data centre, asked the way a host asks: `dig` at the
 * group's gateway, and the host's own resolver (`getent ahosts`, `ping` by name), set up as
 * docs/networks.md says (`nameserver <gateway>`, `search <group>.<zone>`, `options
 * no-aaaa`, in the namespace's `/etc/netns/<netns>/resolv.conf`). OVN answers on the DPU
 * the asking host sits behind (ovn-controller's DNS responder), from its own group's
 * records only.
 *
 * group-a: a-web (DNS name `web`, dpu1) and a-db (dpu2); group-b, the same CIDR: b-web
 * (DNS name `web`) and b-app (dpu3). Each group's `web` is its own host; a group's name
 * never resolves from the other group; a detached host's name stops resolving.
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdir, mkdtemp, rm, rmdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { eventually, netnsExec, pings } from '../../infra/lab/probes.ts'
import { DEFAULT_DNS_ZONE } from '../../lib/config/dns.ts'
import { dnsDomain } from '../../lib/ovn/index.ts'
import { attachHost, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const GATEWAY = '10.10.10.1'
const network = { cidr: '10.10.10.0/24', gateway: GATEWAY }
const ZONE = DEFAULT_DNS_ZONE

/**
 * What `dig +short` at the gateway answers from `host`: none when nothing answers.
 * `+noedns`: OVN 23.03's responder leaves a query with additional records (EDNS's OPT,
 * which dig adds by default) unanswered; glibc's resolver sends none unless told to.
 */
async function dig(host: LabHost, ...query: string[]): Promise<string[]> {
  const out = await host
    .exec('dig', '+short', '+noedns', '+time=1', '+tries=1', `@${GATEWAY}`, ...query)
    .catch(() => '')
  return out.split('\n').filter((line) => line.trim() !== '' && !line.startsWith(';'))
}

/** The addresses the host's own resolver finds for `name` (`getent ahosts`: getaddrinfo). */
async function resolve(host: LabHost, name: string): Promise<string[]> {
  const out = await host.exec('getent', 'ahosts', name).catch(() => '')
  return [...new Set(out.split('\n').flatMap((line) => line.split(/\s+/, 1)))].filter(Boolean)
}

await labTest('per-group DNS: each group resolves its own names only', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-dns-'))
  const resolvConfs: string[] = []
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    for (const dir of resolvConfs) await rm(dir, { recursive: true, force: true })
    await rmdir('/etc/netns').catch(() => {}) // when no other namespace has files there
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix() })
  const l = lab

  for (const [group, tenantId] of [
    ['group-a', 'tenant-a'],
    ['group-b', 'tenant-b'],
  ] as const) {
    t.equal((await l.api('PUT', `/v1/resource-groups/${group}`, { tenantId, network })).status, 202)
    t.ok(await phaseIs(l, `/v1/resource-groups/${group}`, 'Ready'), `${group} is Ready`)
  }
  const hosts: [
    dpu: number,
    name: string,
    group: string,
    ip: string,
    hostname?: string,
    access?: 'FabricAccess',
  ][] = [
    [1, 'a-web', 'group-a', '10.10.10.11', 'web'],
    [2, 'a-db', 'group-a', '10.10.10.12', 'a-db', 'FabricAccess'],
    [3, 'b-web', 'group-b', '10.10.10.21', 'web'],
    [3, 'b-app', 'group-b', '10.10.10.22'],
  ]
  const byName = new Map<string, LabHost>()
  for (const [dpu, name, group, ip, hostname, access] of hosts) {
    const mac = `0a:00:00:00:0d:${ip.split('.')[3]}`
    const host = await l.addHost({ dpu, name, mac, ipCidr: `${ip}/24` })
    byName.set(name, host)
    // The host's resolver as docs/networks.md says: its gateway, searching its group's
    // domain; no AAAA queries (the gateway refuses them, which fails some lookups: `ping web`).
    const dir = `/etc/netns/${host.netns}`
    resolvConfs.push(dir)
    await mkdir(dir, { recursive: true })
    await writeFile(
      join(dir, 'resolv.conf'),
      `nameserver ${GATEWAY}\nsearch ${dnsDomain(group, ZONE)}\noptions no-aaaa timeout:1 attempts:1\n`,
    )
    const answer = await attachHost(
      l,
      host,
      group,
      ip,
      access ?? 'None',
      hostname ? { hostname } : {},
    )
    t.ok(answer.status < 300, `attach ${name}`)
  }
  for (const [, name] of hosts) t.ok(await hostReady(l, name), `${name} is Ready`)
  const aDb = byName.get('a-db') as LabHost
  const bApp = byName.get('b-app') as LabHost

  await t.test("dig at the gateway: each group's web is its own host", async (t) => {
    const webA = `web.${dnsDomain('group-a', ZONE)}`
    const webB = `web.${dnsDomain('group-b', ZONE)}`
    t.ok(
      await eventually(async () => (await dig(aDb, webA)).includes('10.10.10.11'), 30_000),
      `a-db: ${webA} is a-web`,
    )
    t.same(await dig(aDb, webA), ['10.10.10.11'])
    t.same(await dig(aDb, 'web'), ['10.10.10.11'], 'a-db: the short name web is a-web')
    t.same(await dig(aDb, '-x', '10.10.10.11'), [`${webA}.`], 'and its address is web (PTR)')
    t.ok(
      await eventually(async () => (await dig(bApp, webB)).includes('10.10.10.21'), 30_000),
      `b-app: ${webB} is b-web`,
    )
    t.same(await dig(bApp, 'web'), ['10.10.10.21'], 'b-app: the short name web is b-web')
    t.same(await dig(aDb, webB), [], "a-db: group-b's web does not resolve")
    t.same(await dig(bApp, webA), [], "b-app: group-a's web does not resolve")
    t.same(await dig(bApp, `a-db.${dnsDomain('group-a', ZONE)}`), [], 'nor any group-a name')
  })

  await t.test("the group's names are not answered to the fabric", async (t) => {
    // A query from outside reaches the group's switch through a host's NAT (a-db is
    // FabricAccess on dpu2): OVN's responder there must not answer it from the records.
    const natIp = l.dpus[1]?.natIp ?? ''
    await aDb.exec('ip', 'route', 'replace', 'default', 'via', GATEWAY, 'dev', 'eth0')
    t.ok(
      await eventually(() => pings(l.router.netns, natIp, 1), 20_000),
      'a-db is reachable at its NAT IP',
    )
    const asked = await netnsExec(
      l.router.netns,
      'dig',
      '+short',
      '+noedns',
      '+time=1',
      '+tries=1',
      `@${natIp}`,
      `web.${dnsDomain('group-a', ZONE)}`,
    ).catch(() => '')
    t.notMatch(asked, /10\.10\.10\./, `no private address answered: ${asked.trim()}`)
  })

  await t.test("the host's own resolver (getent, ping) finds the same", async (t) => {
    t.same(await resolve(aDb, 'web'), ['10.10.10.11'], 'a-db: web (search group-a) is a-web')
    t.ok(await eventually(() => pings(aDb.netns, 'web'), 20_000), 'a-db pings web by name')
    t.same(await resolve(bApp, 'web'), ['10.10.10.21'], 'b-app: web (search group-b) is b-web')
    t.same(await resolve(bApp, 'a-db'), [], "b-app: group-a's a-db is unknown")
    t.same(await resolve(aDb, 'b-app'), [], "a-db: group-b's b-app is unknown")
  })

  await t.test("a detached host's name stops resolving", async (t) => {
    t.equal((await l.api('DELETE', '/v1/managed-resources/a-web')).status, 202)
    t.ok(await isGone(l, '/v1/managed-resources/a-web'), 'a-web is gone')
    t.ok(
      await eventually(async () => (await dig(aDb, 'web')).length === 0, 30_000),
      'web no longer resolves in group-a',
    )
    t.same(await dig(bApp, 'web'), ['10.10.10.21'], "group-b's web still does")
  })
})
