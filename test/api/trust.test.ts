/**
 * Trust boundaries at the API: physical facts (DPU, host port, NAT IP, DHCP server) come
 * from the operator's inventory, and a tenant token reaches only what is its own. Each
 * test is a finding of the security review, tried as an attacker would through HTTP.
 */
import { createHash } from 'node:crypto'
import { Redis } from 'ioredis'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { heartbeatKeyOf } from '../../lib/agent-protocol/credentials.ts'
import { agentQueueName } from '../../lib/agent-protocol/index.ts'
import { FRR_QUEUE } from '../../lib/jobs/frr.ts'
import { CONTROLLER_QUEUE } from '../../lib/jobs/index.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { jsonCaller } from '../helpers/http.ts'
import { asUser, groupSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'

const OPERATOR = 'operator-token-0123456789abcdef'
const VICTIM = 'victim-token-0123456789abcdef'
const EVIL = 'evil-token-0123456789abcdef'

function api(p: Pipeline) {
  const app = createApp({
    readiness: {},
    v1: {
      client: p.client,
      tokens: { operator: [OPERATOR], tenants: { victim: [VICTIM], evil: [EVIL] } },
    },
  })
  const call = jsonCaller(app)
  return (method: string, path: string, token: string, body?: unknown) =>
    call(method, path, body, token)
}

const host = (group: string, dpu: string, mac: string, extra: Record<string, unknown> = {}) => ({
  resourceGroup: group,
  hostMAC: mac,
  dpu: { id: dpu },
  ...extra,
})

t.test('the operator inventory decides where hosts go', async (t) => {
  const p = await startPipeline(t)
  const call = api(p)
  await p.agent('dpu-v')
  await p.agent('dpu-e')
  await p.agent('dpu-q')
  await p.agent('dpu-f')
  // The operator's inventory: one DPU per tenant, each with its host port and fabric IPs.
  for (const [id, tenant, ips] of [
    ['dpu-v', 'victim', ['172.18.0.21', '172.18.0.121']],
    ['dpu-e', 'evil', ['172.18.0.22', '172.18.0.122']],
  ] as const) {
    const put = await call('PUT', `/v1/dpus/${id}`, OPERATOR, {
      tenantId: tenant,
      fabricIps: ips,
      hostPorts: ['pf0hpf'],
    })
    t.equal(put.status, 201, `the operator adds ${id}`)
  }
  t.equal(
    (await call('PUT', '/v1/dpus/dpu-x', EVIL, { fabricIps: ['172.18.0.30'] })).status,
    403,
    'a tenant cannot add to the inventory',
  )
  t.equal((await call('PUT', '/v1/resource-groups/net-v', VICTIM, groupSpec('victim'))).status, 202)
  t.equal((await call('PUT', '/v1/resource-groups/net-e', EVIL, groupSpec('evil'))).status, 202)
  await until(
    () => p.client.listGroups(),
    (gs) => gs.length === 2 && gs.every((g) => g.status.phase === 'Ready'),
  )
  const victimHost = await call(
    'PUT',
    '/v1/managed-resources/victim-1',
    VICTIM,
    host('net-v', 'dpu-v', '52:54:00:00:aa:01', { hostAccess: 'FabricAccess' }),
  )
  t.equal(victimHost.status, 202, "the victim attaches a host on its DPU's only port")
  await until(
    () => p.client.getHost('victim-1'),
    (h) => h?.status.phase === 'Ready',
  )
  const portsBefore = await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port')

  t.test("1. host hijack: a tenant cannot bind another tenant's DPU or port", async (t) => {
    const hijack = await call(
      'PUT',
      '/v1/managed-resources/evil-1',
      EVIL,
      host('net-e', 'dpu-v', '52:54:00:00:ee:01', { identifier: 'pf0hpf' }),
    )
    t.equal(hijack.status, 400, "another tenant's DPU is refused")
    t.match(hijack.json.error.issues, [
      { path: 'dpu.id', message: /no DPU dpu-v is assigned to tenant evil/ },
    ])
    const missing = await call(
      'PUT',
      '/v1/managed-resources/evil-1',
      EVIL,
      host('net-e', 'dpu-nope', '52:54:00:00:ee:01'),
    )
    t.same(
      missing.json.error.issues.map((i: { path: string }) => i.path),
      hijack.json.error.issues.map((i: { path: string }) => i.path),
      'and reads exactly like a DPU that does not exist',
    )
    const taken = await call(
      'PUT',
      '/v1/managed-resources/victim-2',
      VICTIM,
      host('net-v', 'dpu-v', '52:54:00:00:aa:02'),
    )
    t.equal(taken.status, 409, 'a second host on a port already held is refused')
    t.match(taken.json.error.message, /DPU host port dpu-v\/pf0hpf is already in use/)
    t.notMatch(taken.json.error.message, /victim-1/, 'without naming who holds it')
    t.equal(
      (await p.client.getHost('victim-1'))?.status.phase,
      'Ready',
      "the victim's host stays Ready",
    )
    t.equal(
      await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port'),
      portsBefore,
      'and NB is untouched',
    )
  })

  t.test('3. fabric address hijack: fabric IPs come from the inventory only', async (t) => {
    const forged = await call(
      'PUT',
      '/v1/managed-resources/evil-2',
      EVIL,
      host('net-e', 'dpu-e', '52:54:00:00:ee:02', {
        dpu: { id: 'dpu-e', ips: ['172.18.0.22', '172.18.0.121'] },
        hostAccess: 'PublicAccess',
      }),
    )
    t.equal(forged.status, 400, 'a tenant giving fabric IPs is refused')
    t.match(forged.json.error.issues, [{ path: 'dpu.ips', message: /inventory/ }])
    const fair = await call(
      'PUT',
      '/v1/managed-resources/evil-2',
      EVIL,
      host('net-e', 'dpu-e', '52:54:00:00:ee:02', { hostAccess: 'FabricAccess' }),
    )
    t.equal(fair.status, 202)
    await until(
      () => p.client.getHost('evil-2'),
      (h) => h?.status.phase === 'Ready',
    )
    const nat = await p.natRules(topologyNames.gatewayRouter('net-e', 'dpu-e'))
    const hostIp = (await p.client.getHost('evil-2'))?.status.hostAccessIPs?.hostIP
    t.ok(
      nat.includes(`dnat_and_snat 172.18.0.122 ${hostIp}`),
      "the host's fabric address is its DPU's NAT IP from the inventory",
    )
    t.notOk(
      nat.some((r) => r.includes('172.18.0.121')),
      "the victim's NAT IP never appears on the attacker's gateway router",
    )
    const moveDpu = await call('PUT', '/v1/dpus/dpu-v', OPERATOR, {
      tenantId: 'evil',
      fabricIps: ['172.18.0.21', '172.18.0.121'],
      hostPorts: ['pf0hpf'],
    })
    t.equal(moveDpu.status, 409, 'a DPU serving hosts cannot be handed to another tenant')
    t.match(
      JSON.stringify(moveDpu.json),
      /DPU dpu-v serves hosts/,
      'saying it serves hosts (not that it changed: sending it again cannot help)',
    )
    const reuse = await call('PUT', '/v1/dpus/dpu-z', OPERATOR, {
      fabricIps: ['172.18.0.121'],
    })
    t.equal(reuse.status, 409, "no DPU may list another DPU's fabric IP")
  })

  t.test('4. names that collide across tenants break nobody', async (t) => {
    // Joined with "-", group a-dpu-q's host ts-lr and group a's transit port on dpu-q
    // were the same NB name. Fresh DPUs: a DPU serves one group at a time.
    t.equal((await call('PUT', '/v1/resource-groups/a-dpu-q', EVIL, groupSpec('evil'))).status, 202)
    t.equal((await call('PUT', '/v1/resource-groups/a', VICTIM, groupSpec('victim'))).status, 202)
    await until(
      () => p.client.listGroups(),
      (gs) => gs.every((g) => g.status.phase === 'Ready'),
    )
    await call('PUT', '/v1/dpus/dpu-f', OPERATOR, {
      tenantId: 'evil',
      fabricIps: ['172.18.0.34', '172.18.0.134'],
      hostPorts: ['pf0hpf', 'pf1hpf'],
    })
    await call('PUT', '/v1/dpus/dpu-q', OPERATOR, {
      tenantId: 'victim',
      fabricIps: ['172.18.0.33', '172.18.0.133'],
      hostPorts: ['pf0hpf', 'pf1hpf'],
    })
    t.equal(
      (
        await call(
          'PUT',
          '/v1/managed-resources/ts-lr',
          EVIL,
          host('a-dpu-q', 'dpu-f', '52:54:00:00:ee:03', { identifier: 'pf1hpf' }),
        )
      ).status,
      202,
    )
    t.equal(
      (
        await call(
          'PUT',
          '/v1/managed-resources/victim-a',
          VICTIM,
          host('a', 'dpu-q', '52:54:00:00:aa:03', { identifier: 'pf1hpf' }),
        )
      ).status,
      202,
    )
    const ready = await until(
      async () => [await p.client.getHost('ts-lr'), await p.client.getHost('victim-a')],
      (hs) => hs.every((h) => h?.status.phase === 'Ready'),
    )
    t.ok(
      ready.every((h) => h?.status.phase === 'Ready'),
      "both tenants' hosts are Ready: no constraint violation on a shared name",
    )
    const taken = await call('PUT', '/v1/resource-groups/a', EVIL, groupSpec('evil'))
    t.equal(taken.status, 409, "a tenant PUT on another tenant's name is refused")
    t.same(
      taken.json.error,
      { code: 'NAME_TAKEN', message: 'the resource group name a is not available; choose another' },
      'with an answer that says nothing of the object or its owner',
    )
    const read = await call('GET', '/v1/resource-groups/a', EVIL)
    const none = await call('GET', '/v1/resource-groups/never-made', EVIL)
    t.same(
      [read.status, read.json.error.code],
      [none.status, none.json.error.code],
      "another tenant's name reads as missing",
    )
  })

  t.test("a DPU handed to another tenant keeps none of the last one's history", async (t) => {
    const dpu = { fabricIps: ['172.18.0.41', '172.18.0.141'], hostPorts: ['pf0hpf'] }
    t.equal(
      (await call('PUT', '/v1/dpus/dpu-h', OPERATOR, { ...dpu, tenantId: 'victim' })).status,
      201,
    )
    await p.controller.store.events.record('dpu', 'dpu-h', {
      type: 'Warning',
      reason: 'StrayPortIsolated',
      message: 'DPU dpu-h holds pf0hpf bound to hz/net-v/victim-secret, which nothing wants there',
    })
    const own = await call('GET', '/v1/dpus/dpu-h/events', VICTIM)
    t.match(JSON.stringify(own.json), /victim-secret/, 'its tenant reads its history')
    t.ok((await call('PUT', '/v1/dpus/dpu-h', OPERATOR, { ...dpu, tenantId: 'evil' })).status < 300)
    const next = await call('GET', '/v1/dpus/dpu-h/events', EVIL)
    t.equal(next.status, 200)
    t.notMatch(JSON.stringify(next.json), /victim/, 'the next tenant reads none of it')
    t.equal((await call('DELETE', '/v1/dpus/dpu-h', OPERATOR)).status, 204)
    t.same(await p.controller.store.events.list('dpu', 'dpu-h'), [], 'a deleted DPU leaves none')
  })

  t.test("no DPU takes the controller's identity", async (t) => {
    const dpu = await call('PUT', '/v1/dpus/hydrazine-controller', OPERATOR, {
      fabricIps: ['172.18.0.40', '172.18.0.140'],
    })
    t.equal(dpu.status, 400, "a DPU named as the controller's certificate is refused")
    t.match(JSON.stringify(dpu.json), /reserved/, 'saying the id is reserved')
    const hostOn = await call(
      'PUT',
      '/v1/managed-resources/on-controller',
      OPERATOR,
      host('net-v', 'hydrazine-controller', '52:54:00:00:cc:01'),
    )
    t.equal(hostOn.status, 400, 'and so is a host placed on one')
    t.match(JSON.stringify(hostOn.json), /dpu\.id/, 'naming dpu.id')
  })

  t.test('6. a DPU reaches only its own queue and heartbeat', async (t) => {
    const refused = await call('POST', '/v1/dpus/dpu-v/credentials', VICTIM)
    t.equal(refused.status, 403, 'a tenant cannot issue DPU credentials')
    const issued = await call('POST', '/v1/dpus/dpu-w/credentials', OPERATOR)
    t.equal(issued.status, 404, 'nor can anyone for a DPU outside the inventory')
    await call('PUT', '/v1/dpus/dpu-w', OPERATOR, {
      tenantId: 'victim',
      fabricIps: ['172.18.0.23', '172.18.0.123'],
      hostPorts: ['pf0hpf'],
    })
    const creds = await call('POST', '/v1/dpus/dpu-w/credentials', OPERATOR)
    t.equal(creds.status, 201, 'the operator issues them')
    const { username, password } = creds.json.redis as { username: string; password: string }
    t.equal(username, 'dpu-dpu-w')
    t.match(password, /^[0-9a-f]{64}$/)

    // The DPU's agent works with them: jobs in, acks out, without writing the controller's keys.
    const agentW = await p.agent('dpu-w', { redis: { username, password } })
    t.equal(
      (
        await call(
          'PUT',
          '/v1/managed-resources/victim-w',
          VICTIM,
          host('net-v', 'dpu-w', '52:54:00:00:aa:04'),
        )
      ).status,
      202,
    )
    const ready = await until(
      () => p.client.getHost('victim-w'),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(ready?.status.phase, 'Ready', 'a host on that DPU turns Ready from its acks')

    // What a compromised DPU tries with them.
    const dpu = new Redis(asUser(p.agentsRedisUrl, { username, password }), {
      maxRetriesPerRequest: 1,
    })
    t.teardown(() => dpu.disconnect())
    const attempts: [string, () => Promise<unknown>][] = [
      ['read the desired state', () => dpu.hgetall('hz:{store}:mr:victim-1')],
      ['rewrite a spec', () => dpu.hset('hz:{store}:mr:victim-1', 'spec', '{}')],
      [
        "forge another DPU's ack",
        () => dpu.hset(`${p.prefix}:${agentQueueName('dpu-v')}:x`, 'returnvalue', '{}'),
      ],
      [
        'touch the controller queue',
        () => dpu.xadd(`${p.prefix}:${CONTROLLER_QUEUE}:events`, '*', 'event', 'completed'),
      ],
      ['announce a /32', () => dpu.hset(`${p.prefix}:${FRR_QUEUE}:forged`, 'name', 'announce')],
      ['beat for another DPU', () => dpu.set(heartbeatKeyOf('dpu-v'), '{}')],
      ['list every key', () => dpu.scan('0')],
      ['dump the server', () => dpu.call('KEYS', '*')],
      ['reconfigure Redis', () => dpu.call('CONFIG', 'SET', 'protected-mode', 'no')],
      ['read IPAM', () => dpu.call('HGETALL', 'hz:ipam:{public-ip}:registry')],
      ["flush everyone's scripts", () => dpu.call('SCRIPT', 'FLUSH')],
      ['replace server functions', () => dpu.call('FUNCTION', 'FLUSH')],
      // Commands no agent sends are refused, whatever their category.
      ['learn every key written', () => dpu.call('CLIENT', 'TRACKING', 'on', 'BCAST')],
      ['list the clients', () => dpu.call('CLIENT', 'LIST')],
      ['wake blocked clients', () => dpu.call('CLIENT', 'UNBLOCK', '1')],
      ['inspect its own key', () => dpu.call('OBJECT', 'ENCODING', heartbeatKeyOf('dpu-w'))],
      ['read the configuration', () => dpu.call('CONFIG', 'GET', 'maxmemory')],
      ['watch every command', () => dpu.call('MONITOR')],
      ['grow its own value', () => dpu.call('SETRANGE', heartbeatKeyOf('dpu-w'), '1', 'x')],
      ['subscribe to key events', () => dpu.call('PSUBSCRIBE', '__key*__:*')],
      ['read the slow log', () => dpu.call('SLOWLOG', 'GET')],
    ]
    for (const [what, attempt] of attempts) {
      await t.rejects(attempt(), /NOPERM|no permissions/, `cannot ${what}`)
    }
    // DEBUG is off on the server as well: ask the ACL itself.
    const admin = new Redis(p.agentsRedisUrl, { maxRetriesPerRequest: 1 })
    t.teardown(() => admin.disconnect())
    t.match(
      await admin.call('ACL', 'DRYRUN', username, 'DEBUG', 'SLEEP', '0'),
      /no permissions to run the 'debug' command/,
      'cannot debug the server, even where DEBUG is on',
    )
    t.ok(await dpu.set(heartbeatKeyOf('dpu-w'), '{}', 'PX', 1000), 'may beat for itself')
    // Issuing again replaces them: the old password stops working.
    await agentW.close()
    await call('POST', '/v1/dpus/dpu-w/credentials', OPERATOR)
    // (It also closed the connections that held them.)
    const probe = new Redis(p.agentsRedisUrl, { maxRetriesPerRequest: 1 })
    t.teardown(() => probe.disconnect())
    await t.rejects(
      probe.call('AUTH', username, password),
      /WRONGPASS/,
      'the old password is refused',
    )
  })

  t.test('6. an ack counts only from its own DPU, and when the SB agrees', async (t) => {
    // A DPU that answers for another DPU's chassis, and one whose ovn-controller never
    // binds anything: neither may make a host Ready.
    await p.agent('dpu-l', {
      tamper: (ack) => ({ ...ack, dpuId: 'dpu-v', chassis: 'dpu-v' }),
    })
    await p.agent('dpu-n', { noSouthbound: true })
    for (const [id, n] of [
      ['dpu-l', 24],
      ['dpu-n', 25],
    ] as const) {
      await call('PUT', `/v1/dpus/${id}`, OPERATOR, {
        tenantId: 'victim',
        fabricIps: [`172.18.0.${n}`, `172.18.0.${n + 100}`],
        hostPorts: ['pf0hpf'],
      })
    }
    await call(
      'PUT',
      '/v1/managed-resources/lied-to',
      VICTIM,
      host('net-v', 'dpu-l', '52:54:00:00:aa:05'),
    )
    await call(
      'PUT',
      '/v1/managed-resources/unbound',
      VICTIM,
      host('net-v', 'dpu-n', '52:54:00:00:aa:06'),
    )
    const lied = await until(
      () => p.client.getHost('lied-to'),
      (h) => h?.status.phase === 'Failed',
    )
    t.equal(lied?.status.phase, 'Failed', "an ack in another DPU's name fails the host")
    t.match(
      JSON.stringify(lied?.status.conditions),
      /names dpuId dpu-v, chassis dpu-v; expected DPU and chassis dpu-l/,
      'saying what the ack got wrong',
    )
    const unbound = await until(
      () => p.client.getHost('unbound'),
      (h) => h?.status.conditions.some((c) => c.reason === 'NotBoundInSouthbound') ?? false,
    )
    t.equal(unbound?.status.phase, 'Configuring', 'an ack the SB does not bear out is not Ready')
    t.equal(unbound?.status.configsSynced, false)
  })

  t.test('5. DHCP relays: servers from the operator, circuit ids unique', async (t) => {
    const anywhere = await call('PUT', '/v1/resource-groups/dhcp-x', EVIL, {
      ...groupSpec('evil'),
      dhcpServer: '172.18.0.1',
    })
    t.equal(anywhere.status, 400, 'a tenant cannot make DPUs relay to any fabric address')
    t.match(anywhere.json.error.issues, [{ path: 'dhcpServer' }])
    // Two names whose old circuit ids (32 bits of a hash of the name) are the same.
    const [first, second] = collidingNames()
    const old = (name: string) => createHash('sha256').update(name).digest('hex').slice(0, 8)
    t.equal(old(first), old(second), `${first} and ${second} collide under the old scheme`)
    const ids: string[] = []
    for (const name of [first, second]) {
      await p.client.applyGroup(name, { ...groupSpec('victim'), dhcpServer: '192.0.2.53' })
    }
    for (const name of [first, second]) {
      const g = await until(
        () => p.client.getGroup(name),
        (g) => g?.status.dhcpCircuitId !== undefined,
      )
      ids.push(g?.status.dhcpCircuitId ?? '')
    }
    t.not(ids[0], ids[1], 'each group gets its own circuit id')
    t.match(ids[0], /^hzr[0-9a-f]{8}$/, 'a valid interface name')
  })
})

/** Two group names whose SHA-256 share their first 32 bits (a birthday search). */
function collidingNames(): [string, string] {
  const seen = new Map<string, string>()
  for (let i = 0; ; i++) {
    const name = `g${i.toString(36)}`
    const h = createHash('sha256').update(name).digest('hex').slice(0, 8)
    const other = seen.get(h)
    if (other) return [other, name]
    seen.set(h, name)
  }
}
