/**
 * `npm start` on a site upgraded from a version that kept no record of the identities its
 * CA issued: a DPU's agent presents the certificate that CA gave it, and its hosts' SB
 * takes it (a chassis certificate for that key), as the pipeline's `recordIdentities`
 * case shows for the Kubernetes DPUs' CA.
 */
import { X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import t from 'tap'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { freePort } from '../../lib/process/ports.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { eventually, startMain } from '../helpers/processes.ts'
import { dpuFabricIps, groupSpec, hostSpec } from '../helpers/requests.ts'
import { dummyAddress, tempDir, withStack } from '../helpers/stack.ts'
import { heartbeat, startStandInAgent } from '../pipeline/stand-in-agent.ts'

t.test(
  'embedded CA: a DPU whose identity is not on record is certified for the key its agent presents',
  async (t) => {
    const store = await withStack(t)
    const agents = await withStack(t)
    const storeUrl = store.redis?.url
    const agentsUrl = agents.redis?.url
    if (!storeUrl || !agentsUrl) throw new Error('the stacks run Redis')
    const dataDir = await tempDir(t)
    const port = await freePort()
    const main = startMain({
      HYDRAZINE_DATA_DIR: dataDir,
      HYDRAZINE_HTTP_PORT: String(port),
      HYDRAZINE_GRPC_PORT: String(await freePort()),
      HYDRAZINE_OVN_CENTRAL: 'per-group',
      // Off loopback: each group's SB speaks TLS and admits only its chassis.
      HYDRAZINE_EMBEDDED_LISTEN: await dummyAddress(t),
      REDIS_URL: storeUrl,
      AGENTS_REDIS_URL: agentsUrl,
    })
    t.teardown(() => {
      main.child.kill('SIGKILL')
    })
    t.ok(await eventually(async () => main.output().includes('Hydrazine is up'), 60_000), 'up')
    const token = (await readFile(`${dataDir}/operator-token`, 'utf8')).trim()
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      return { status: res.status, json: (await res.json()) as Record<string, unknown> }
    }

    t.equal(
      (await call('PUT', '/dpus/dpu-1', { fabricIps: dpuFabricIps('dpu-1') })).status,
      201,
      'dpu-1 in the inventory',
    )
    const issued = await call('POST', '/dpus/dpu-1/credentials')
    t.equal(issued.status, 201, 'credentials issued by the embedded CA')
    const { cert } = issued.json.tls as { cert: string }

    // What an earlier version left: the credentials, and no record of the identity.
    const redis = createRedis({ url: storeUrl })
    t.teardown(() => redis.disconnect())
    const [, records] = await redis.scan('0', 'MATCH', '*dpu:dpu-1:identity', 'COUNT', 1000)
    t.equal(records.length, 1, "the identity's record")
    await redis.del(...records)

    const agent = await startStandInAgent(t, { redisUrl: agentsUrl, dpuId: 'dpu-1' })
    const beats = createRedis({ url: agentsUrl })
    t.teardown(() => beats.disconnect())
    await new Heartbeats(beats).write({ ...heartbeat('dpu-1', ['2.0']), identity: cert }, 120_000)

    t.equal((await call('PUT', '/resource-groups/group-a', groupSpec())).status, 202, 'group-a')
    t.equal(
      (await call('PUT', '/managed-resources/host-a', hostSpec('group-a', 'dpu-1', 1))).status,
      202,
      'host-a on dpu-1',
    )
    const configured = await eventually(
      async () => agent.jobs.some((job) => job.name === 'configure'),
      60_000,
    )
    const host = await call('GET', '/managed-resources/host-a')
    t.ok(configured, 'host-a is configured', { status: host.json.status })
    const configure = agent.jobs.find((job) => job.name === 'configure')
    const sbCertificate: unknown = configure?.data?.group?.sbCertificate
    t.ok(
      typeof sbCertificate === 'string' &&
        new X509Certificate(sbCertificate).publicKey.equals(new X509Certificate(cert).publicKey),
      "with the key its agent presents certified for group-a's SB",
    )
    t.equal(
      (await redis.get(records[0] ?? '')) ?? '',
      cert,
      'the identity its agent presents is on record again',
    )
  },
)
