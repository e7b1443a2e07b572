/**
 * A group's security policies between the proto (`Policy`, `PolicyPeer` and their enums
 * in `proto/hydrazine/v1/resources.proto`) and the model (`lib/model/policies.ts`): as the
 * input the schemas validate (a field the proto leaves unset left out, so the schemas'
 * defaults and refusals apply as to a JSON body), and back as messages.
 */
import {
  PolicyAction,
  PolicyDirection,
  type Policy as PolicyModel,
  PolicyProtocol,
} from '../../lib/model/policies.ts'
import type { Policy, Policy__Output } from '../../proto/gen/hydrazine/v1/Policy.ts'
import { PolicyAction as PolicyActionProto } from '../../proto/gen/hydrazine/v1/PolicyAction.ts'
import { PolicyDirection as PolicyDirectionProto } from '../../proto/gen/hydrazine/v1/PolicyDirection.ts'
import { PolicyProtocol as PolicyProtocolProto } from '../../proto/gen/hydrazine/v1/PolicyProtocol.ts'
import { type ProtoEnum, protoEnum } from './fields.ts'

export const POLICY_DIRECTION = protoEnum(
  PolicyDirectionProto,
  'POLICY_DIRECTION',
  PolicyDirection.options,
)
export const POLICY_ACTION = protoEnum(PolicyActionProto, 'POLICY_ACTION', PolicyAction.options)
export const POLICY_PROTOCOL = protoEnum(
  PolicyProtocolProto,
  'POLICY_PROTOCOL',
  PolicyProtocol.options,
)

type Input = Record<string, unknown>

const ifSet = (key: string, value: unknown): Input => (value === undefined ? {} : { [key]: value })
const ifAny = (key: string, values: readonly unknown[]): Input =>
  values.length === 0 ? {} : { [key]: values }
/** An enum field: its value, left out when UNSPECIFIED; the raw name when unknown (refused). */
const enumField = (
  key: string,
  table: ProtoEnum<string, string>,
  name: string | number | undefined,
): Input => (table.isUnknown(name) ? { [key]: String(name) } : ifSet(key, table.fromProto(name)))

/** `Policy` messages as the rules to validate. */
export function policiesInput(policies: readonly Policy__Output[]): Input[] {
  return policies.map((p) => ({
    name: p.name,
    ...enumField('direction', POLICY_DIRECTION, p.direction),
    ...enumField('action', POLICY_ACTION, p.action),
    ...ifAny('hosts', p.hosts),
    ...ifSet(
      'peer',
      p.peer ? { ...ifAny('hosts', p.peer.hosts), ...ifSet('cidr', p.peer.cidr) } : undefined,
    ),
    ...enumField('protocol', POLICY_PROTOCOL, p.protocol),
    ...ifSet('ports', p.ports),
    ...ifSet('priority', p.priority),
  }))
}

/** A group's rules as `Policy` messages. */
export function policyMessages(policies: readonly PolicyModel[] | undefined): Policy[] {
  return (policies ?? []).map((p) => ({
    name: p.name,
    direction: POLICY_DIRECTION.toProto(p.direction),
    action: POLICY_ACTION.toProto(p.action),
    hosts: [...(p.hosts ?? [])],
    ...(p.peer
      ? {
          peer: {
            hosts: [...(p.peer.hosts ?? [])],
            ...(p.peer.cidr === undefined ? {} : { cidr: p.peer.cidr }),
          },
        }
      : {}),
    protocol: POLICY_PROTOCOL.toProto(p.protocol),
    ...(p.ports === undefined ? {} : { ports: p.ports }),
    ...(p.priority === undefined ? {} : { priority: p.priority }),
  }))
}
