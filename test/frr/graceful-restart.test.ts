import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Queue, QueueEvents } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import { createFrrSync } from '../../functions/frr-sync.ts'
import {
  createFrrController,
  createVty,
  createVtysh,
  parseRunningConfig,
  type ResyncResult,
} from '../../lib/frr/index.ts'
import { FRR_QUEUE, type FrrAck } from '../../lib/jobs/frr.ts'
import { createFrrProducer, startFrrConsumer } from '../../queues/frr.ts'
import { eventually, fabricBgpRoutes, redisAnnouncementSource, withPeeredBgpd } from './fixtures.ts'

const run = promisify(execFile)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const NAT_IP = '10.77.0.105'
const PUBLIC_IP = '203.0.113.7'
const STORE_KEY = 'hz:test:publicips'

/** Pings from `netns` every 50 ms for `count` packets; resolves with sent and received. */
async function pings(netns: string, ip: string, count: number) {
  const { stdout } = await run('ip', [
    ...['netns', 'exec', netns, 'ping', '-n', '-q'],
    ...['-i', '0.05', '-W', '1', '-c', String(count), ip],
  ]).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }))
  const m = /(\d+) packets transmitted, (\d+) received/.exec(stdout)
  return { sent: Number(m?.[1] ?? 0), received: Number(m?.[2] ?? 0) }
}

t.test(
  'bgpd killed and restarted: the fabric keeps the /32s (stale) and forwarding, nothing acknowledged is lost',
  async (t) => {
    const { ns, stack, vtyDir, fabric } = await withPeeredBgpd(t, {
      redis: true,
      // The DPU side of the path: the NAT IP and, behind it, the public IP's host.
      before: async (ns) => {
        await run('ip', ['-n', ns.hydrazine, 'addr', 'add', `${NAT_IP}/24`, 'dev', ns.hydrazineDev])
        await run('ip', ['-n', ns.hydrazine, 'addr', 'add', `${PUBLIC_IP}/32`, 'dev', 'lo'])
      },
    })
    const redisUrl = stack.redis?.url
    if (!redisUrl) throw new Error('stack started without redis')

    const redis = new Redis(redisUrl)
    const connection = new Redis(redisUrl, { maxRetriesPerRequest: null })
    const vty = createVty({ vtyDir, reconnectMs: 100 })
    const frr = createFrrController({ vty, saveConfig: true })
    const resyncs: ResyncResult[] = []
    const consumer = await startFrrConsumer({
      connection,
      frr,
      source: redisAnnouncementSource(redis, STORE_KEY),
      handler: createFrrSync({ frr }),
      prefix: 'hzgr',
      resyncEveryMs: 0,
      onResync: (result) => resyncs.push(result),
    })
    const queue = new Queue(FRR_QUEUE, { connection: { url: redisUrl }, prefix: 'hzgr' })
    const events = new QueueEvents(FRR_QUEUE, { connection: { url: redisUrl }, prefix: 'hzgr' })
    t.teardown(async () => {
      await consumer.close()
      vty.close()
      await queue.close()
      await events.close()
      redis.disconnect()
      connection.disconnect()
    })
    await events.waitUntilReady()
    const producer = createFrrProducer(queue)
    const announce = async (publicIp: string, owner: string) => {
      await redis.hset(STORE_KEY, publicIp, NAT_IP)
      const job = await producer.announce({ publicIp, nextHop: NAT_IP, owner, specVersion: 1 })
      return (await job.waitUntilFinished(events, 30_000)) as FrrAck
    }

    const before = ['203.0.113.7', ...Array.from({ length: 20 }, (_, i) => `198.51.100.${i + 1}`)]
    for (const [i, ip] of before.entries()) await announce(ip, `host-${i}`)
    const routes = () => fabricBgpRoutes(fabric)
    await eventually(routes, (r) => before.every((ip) => r.get(`${ip}/32`) === NAT_IP))
    t.same(await pings(ns.fabric, PUBLIC_IP, 3), { sent: 3, received: 3 }, 'traffic flows')

    const kill = async () => {
      const pid = Number((await readFile(join(vtyDir, 'bgpd.pid'), 'utf8')).trim())
      process.kill(pid, 'SIGKILL')
    }
    const entry = async () =>
      JSON.parse(await fabric.show(`show bgp ipv4 unicast ${PUBLIC_IP}/32 json`)) as {
        paths?: { stale?: boolean }[]
      }
    /** Waits until the fabric holds `ips` via the NAT IP, none of them stale. */
    const settled = async (ips: readonly string[]) => {
      const seen = await eventually(routes, (r) => ips.every((ip) => r.get(`${ip}/32`) === NAT_IP))
      const fresh = await eventually(entry, (e) => e.paths?.[0]?.stale !== true)
      return { missing: ips.filter((ip) => seen.get(`${ip}/32`) !== NAT_IP), fresh }
    }
    const announced = async () =>
      [
        ...parseRunningConfig(
          await createVtysh({ vtyDir }).show('show running-config'),
        ).owned.keys(),
      ].sort()

    // 1. With the consumer running: ~6 s of pings; bgpd is SIGKILLed 1 s in and the
    // stack starts it again.
    let traffic = pings(ns.fabric, PUBLIC_IP, 120)
    await sleep(1000)
    await kill()
    // A change asked for while bgpd is down is acknowledged once it is back.
    const during = announce('203.0.113.8', 'host-late')
    const stale = await eventually(entry, (e) => e.paths?.[0]?.stale === true, 5_000)
    t.equal(stale.paths?.[0]?.stale, true, 'the fabric holds the /32 as stale while bgpd is down')
    t.match(await during, { prefix: '203.0.113.8/32', announced: true, nextHop: NAT_IP })
    let seen = await traffic
    t.ok(seen.sent >= 100, `pings sent (${seen.sent})`)
    t.equal(seen.received, seen.sent, 'no ping lost across the restart')
    const wanted = [...before, '203.0.113.8']
    let after = await settled(wanted)
    t.same(after.missing, [], 'afterwards the fabric routes every public IP')
    t.not(after.fresh.paths?.[0]?.stale, true, 'no longer stale once bgpd announced again')
    t.same(
      await announced(),
      wanted.map((ip) => `${ip}/32`).sort(),
      'the restarted bgpd announces exactly what was acknowledged',
    )
    t.ok(resyncs.length >= 1, 'the consumer resynced when bgpd came back')

    // 2. With the controller (the consumer) down: only what bgpd saved can bring the
    // routes back, before the fabric's stale timer or our end-of-RIB drops them.
    await consumer.close()
    vty.close()
    traffic = pings(ns.fabric, PUBLIC_IP, 120)
    await sleep(1000)
    await kill()
    await eventually(entry, (e) => e.paths?.[0]?.stale === true, 5_000)
    seen = await traffic
    t.equal(seen.received, seen.sent, 'no ping lost while bgpd restarts alone')
    after = await settled(wanted)
    t.same(after.missing, [], 'bgpd restarted from its saved config announces every public IP')
    t.same(await announced(), wanted.map((ip) => `${ip}/32`).sort())
  },
)
