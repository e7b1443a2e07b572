/**
 * Queue producers: other systems that ask Hydrazine for changes through Redis rather than
 * HTTP. Each is a caller like any other, with an identity the operator gives it when
 * configuring it (`HYDRAZINE_PRODUCERS_FILE`): a tenant's, or the operator's.
 *
 * The identity is enforced by Redis, not claimed by the job: each producer has a queue of
 * its own (`producerQueueName`) and a Redis user (`producerRedisUser`) whose ACL reaches
 * that queue's keys only, through the commands a BullMQ producer sends. What comes out of
 * a producer's queue was put there by that producer; no producer reaches another's queue,
 * the controller's own queue, or the desired state. Each job also says whose it is
 * (`producer`), which must be the queue's producer: a job with none, or another, is refused.
 *
 * A job is a request, as the HTTP API takes it — apply or delete a group or a host —
 * made with the producer's identity through the same operations (`app/operations.ts`): the
 * same tenancy, validation, placement and quotas, refused whole or applied whole.
 */
import * as v from 'valibot'
import { DPU_REDIS_COMMANDS } from '../agent-protocol/credentials.ts'
import { ADMIN_TENANT } from '../model/admin-network.ts'
import { Rfc1123Label } from '../model/objects.ts'
import type { Caller } from '../model/placement.ts'

/** A producer's id: an RFC 1123 label, as in its queue and Redis user names. */
export const ProducerId = Rfc1123Label

/**
 * A producer's queue. All of them share one hash tag, so a Redis Cluster keeps them on one
 * node, apart from the controller's and the agents' queues.
 *
 * @example producerQueueName('carbide') // '{hz-producers}producer-carbide'
 */
export function producerQueueName(producer: string): string {
  return `{hz-producers}producer-${producer}`
}

/** True for a producer's queue name (`producerQueueName`): it lives on the agents' Redis. */
export function isProducerQueueName(name: string): boolean {
  const [before = ''] = producerQueueName('\n').split('\n')
  return name.startsWith(before) && v.is(ProducerId, name.slice(before.length))
}

/** The Redis user a producer connects as. */
export function producerRedisUser(producer: string): string {
  return `producer-${producer}`
}

const PasswordSha256 = v.pipe(
  v.string(),
  v.regex(/^[0-9a-f]{64}$/, 'must be the SHA-256 of the password, 64 lowercase hex digits'),
)

/**
 * One producer as the operator configures it: whom it acts as (`tenant`, or `operator:
 * true`) and the SHA-256 of its Redis password (the password itself is never stored).
 */
export const ProducerConfig = v.pipe(
  v.strictObject({
    tenant: v.optional(
      v.pipe(
        Rfc1123Label,
        v.check((t) => t !== ADMIN_TENANT, `${ADMIN_TENANT} is reserved for the admin network`),
      ),
    ),
    operator: v.optional(v.literal(true)),
    passwordSha256: PasswordSha256,
  }),
  v.forward(
    v.check(
      (p) => (p.tenant === undefined) !== (p.operator === undefined),
      'give exactly one of tenant (a tenant id) and operator (true)',
    ),
    ['tenant'],
  ),
)

/** `HYDRAZINE_PRODUCERS_FILE`: each producer by id. */
export const ProducersFile = v.record(ProducerId, ProducerConfig)

/** Whom a producer acts as: a tenant, or the operator. */
export type ProducerPrincipal = Caller

export interface Producer {
  readonly id: string
  readonly principal: ProducerPrincipal
  readonly passwordSha256: string
}

/** The producers of a parsed producers file. */
export function producersOf(file: v.InferOutput<typeof ProducersFile>): Producer[] {
  return Object.entries(file).map(([id, p]) => ({
    id,
    principal: p.tenant !== undefined ? { kind: 'tenant', tenant: p.tenant } : { kind: 'operator' },
    passwordSha256: p.passwordSha256,
  }))
}

/**
 * The ACL rules (`ACL SETUSER <user> …`) of a producer: its queue's keys only, the
 * password by its SHA-256, no channels, and the allow-list of commands a BullMQ client
 * sends (the agents' list: a producer adding jobs needs a subset of what a worker does).
 *
 * @param queuePrefix the BullMQ key prefix (default `bull`)
 */
export function producerRedisAclRules(producer: Producer, queuePrefix = 'bull'): string[] {
  return [
    'reset',
    'on',
    `#${producer.passwordSha256}`,
    `~${queuePrefix}:${producerQueueName(producer.id)}:*`,
    'resetchannels',
    '-@all',
    ...DPU_REDIS_COMMANDS.map((command) => `+${command}`),
  ]
}

/** The object a request names. */
const Name = v.pipe(v.string(), v.minLength(1), v.maxLength(63))
const Spec = v.record(v.string(), v.unknown())
/** Whose job it is: must be the producer whose queue it is on. */
const producer = v.string('producer is required: the id this producer was configured with')

const ApplyRequest = v.strictObject({ producer, name: Name, spec: Spec })
const DeleteRequest = v.strictObject({
  producer,
  name: Name,
  force: v.optional(v.boolean(), false),
})

/** The requests a producer may queue, by job name, with their payloads. */
export const ProducerRequests = {
  'group.apply': ApplyRequest,
  'group.delete': DeleteRequest,
  'host.apply': ApplyRequest,
  'host.delete': DeleteRequest,
} as const

export type ProducerRequestName = keyof typeof ProducerRequests

export function isProducerRequestName(name: string): name is ProducerRequestName {
  return Object.hasOwn(ProducerRequests, name)
}

/** What a producer's job returns once its request is accepted. */
export interface ProducerResult {
  readonly kind: 'ResourceGroup' | 'ManagedResource'
  readonly name: string
  readonly specVersion: number
  /** The controller job that converges it; absent when nothing changed. */
  readonly jobId?: string
}
