/**
 * A DPU whose certificate the operator's CA issued (the Kubernetes manifests: the
 * controller runs no CA) gets a chassis certificate of its group's own CA: the controller
 * records the identity its agent presents in its heartbeat, on a real Redis, when the
 * DPUs' CA (its certificate only) issued it for that DPU, and certifies that key. Another
 * DPU's certificate, or one of another CA, is not recorded, and the DPU is refused.
 */
import { X509Certificate } from 'node:crypto'
import { Redis } from 'ioredis'
import t from 'tap'
import { chassisCertificateFor, dpuIdentity } from '../../functions/internal/dpu-central.ts'
import { agentDirectory } from '../../infra/controller.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { ChassisIdentityRefused } from '../../lib/ovn/central.ts'
import {
  type CertificateSigner,
  certificateAuthorityOf,
  newCertificateAuthority,
  trustedBy,
} from '../../lib/pki/index.ts'
import { StateStore } from '../../lib/state/store.ts'
import { refusal, setup } from '../helpers/k8s/fake-centrals.ts'
import { withStack } from '../helpers/stack.ts'
import { heartbeat } from '../pipeline/stand-in-agent.ts'

const stack = await withStack(t, { redis: true })
const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
t.teardown(() => redis.disconnect())

// The operator's CA (cert-manager's, say): the controller is given its certificate only.
const operator = await certificateAuthorityOf(await newCertificateAuthority())
const stranger = await certificateAuthorityOf(await newCertificateAuthority())
const dpuCa = trustedBy(operator.caCert)
const identity = async (ca: CertificateSigner, id: string) =>
  (await ca.issueIdentity({ commonName: id, dnsNames: [id] })).cert

let n = 0
async function controller() {
  n += 1
  const store = new StateStore(redis, `hz:{ident${n}}:`)
  const heartbeats = new Heartbeats(redis)
  const { centrals, ready } = setup({
    nbTlsSecret: 'ovn-nb-tls',
    sbTlsSecret: 'ovn-sb-tls',
    dpuCa,
  })
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a')
  const deps = { store, ovn: centrals, agents: agentDirectory(heartbeats), dpuIdentities: dpuCa }
  /** What the DPU's agent writes under its own heartbeat key. */
  const beat = (dpuId: string, presented?: string) =>
    heartbeats.write(
      { ...heartbeat(dpuId, ['2.0']), ...(presented ? { identity: presented } : {}) },
      60_000,
    )
  return { store, centrals, deps, beat }
}

const groupCa = async (centrals: ReturnType<typeof setup>['centrals']) =>
  new X509Certificate((await centrals.southboundCa?.('tenant-a')) ?? '')

t.test('the identity an agent presents is recorded, and its key certified', async (t) => {
  const { store, centrals, deps, beat } = await controller()
  const own = await identity(operator, `dpu-a${n}`)
  const dpuId = `dpu-a${n}`
  await beat(dpuId, own)
  t.equal(await store.dpus.identity(dpuId), null, 'nothing on record before')
  const cert = await chassisCertificateFor(deps, 'tenant-a', dpuId)
  t.equal(await store.dpus.identity(dpuId), own, 'recorded from the heartbeat')
  const chassis = new X509Certificate(cert ?? '')
  t.ok(chassis.verify((await groupCa(centrals)).publicKey), "of the group's own CA")
  t.ok(chassis.publicKey.equals(new X509Certificate(own).publicKey), "the DPU's own key")
  t.equal(chassis.subject, `CN=${dpuId}`)

  // The operator renews the DPU's certificate; its agent presents the new one.
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const renewed = await identity(operator, dpuId)
  await beat(dpuId, renewed)
  const again = new X509Certificate((await chassisCertificateFor(deps, 'tenant-a', dpuId)) ?? '')
  t.equal(await store.dpus.identity(dpuId), renewed, 'a renewed identity replaces the older')
  t.ok(again.publicKey.equals(new X509Certificate(renewed).publicKey), 'its key certified')
  await beat(dpuId, own)
  t.match(
    await dpuIdentity(deps, dpuId),
    { identity: renewed, refused: /as new or newer/ },
    'an older one presented again is not taken',
  )
})

t.test("another DPU's certificate, or another CA's, is not recorded", async (t) => {
  const { store, deps, beat } = await controller()
  const cases: [string, (id: string) => Promise<string>][] = [
    ["another DPU's, of the DPUs' CA", () => identity(operator, 'dpu-somebody-else')],
    ['its own name, of another CA', (id) => identity(stranger, id)],
  ]
  for (const [what, presented] of cases) {
    const dpuId = `dpu-b${n}-${cases.findIndex((c) => c[0] === what)}`
    await beat(dpuId, await presented(dpuId))
    const waits = await chassisCertificateFor(deps, 'tenant-a', dpuId).catch((e: unknown) => e)
    t.match(
      waits,
      { code: 'DPU_IDENTITY_AWAITED', retryable: true, message: /its agent presents one that/ },
      `${what}: the DPU waits, saying why`,
    )
    t.equal(await store.dpus.identity(dpuId), null, `${what}: nothing recorded`)
  }

  // An agent older than the controller presents none: its hosts wait (retried), and go on
  // once the upgraded agent presents its identity.
  const silent = `dpu-b${n}-silent`
  await beat(silent)
  const waits = await chassisCertificateFor(deps, 'tenant-a', silent).catch((e: unknown) => e)
  t.match(
    waits,
    { code: 'DPU_IDENTITY_AWAITED', retryable: true, message: /its agent presents none/ },
    'an agent that presents none: the DPU waits',
  )
  await beat(silent, await identity(operator, silent))
  t.ok(await chassisCertificateFor(deps, 'tenant-a', silent), 'upgraded: certified')

  // Without the DPUs' CA configured, nothing is taken from a heartbeat.
  const dpuId = `dpu-b${n}-unconfigured`
  await beat(dpuId, await identity(operator, dpuId))
  const { dpuIdentities: _, ...without } = deps
  t.same(await dpuIdentity(without, dpuId), { identity: null }, 'no DPU CA: not recorded')
  const refused = await chassisCertificateFor(without, 'tenant-a', dpuId).catch((e: unknown) => e)
  t.ok(refused instanceof ChassisIdentityRefused, 'and nothing to wait for: refused for good')
})

t.test('an identity recorded while an older one was judged is not overwritten', async (t) => {
  const { store, deps, beat } = await controller()
  const dpuId = `dpu-c${n}`
  const issued = async () => {
    // `validFrom` has second precision: each is newer than the one before.
    await new Promise((resolve) => setTimeout(resolve, 1100))
    return identity(operator, dpuId)
  }
  const first = await identity(operator, dpuId)
  const presented = await issued()
  const renewed = await issued()
  await store.dpus.setIdentity(dpuId, first)
  await beat(dpuId, presented)
  // New credentials are issued (recorded) right after the judge read the record.
  let reads = 0
  const dpus = new Proxy(store.dpus, {
    get(target, key) {
      if (key === 'identity')
        return async (id: string) => {
          const read = await target.identity(id)
          if (++reads === 1) await target.setIdentity(id, renewed)
          return read
        }
      const value = Reflect.get(target, key, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const judged = await dpuIdentity({ ...deps, store: { ...store, dpus } as StateStore }, dpuId)
  t.equal(await store.dpus.identity(dpuId), renewed, 'the newer record stays')
  t.equal(judged.identity, renewed, 'and is the one certified')
  t.match(judged.refused, /as new or newer/, 'the presented one, judged again, is refused')
})
