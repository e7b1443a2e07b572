/**
 * The agent's gRPC service (`proto/agent.proto`), loaded with @grpc/proto-loader and
 * typed by the generated `proto/gen` types. The agent serves it; the controller uses
 * `createAgentClient`.
 *
 * @example
 * const client = createAgentClient('10.0.0.2:50151')
 * client.getStatus({}, (err, status) => console.log(status?.boundPorts))
 */
import * as grpc from '@grpc/grpc-js'
import type { ProtoGrpcType } from '../../proto/gen/agent.ts'
import type { AgentClient, AgentDefinition } from '../../proto/gen/hydrazine/agent/v1/Agent.ts'
import { protoLoaderFor } from '../../proto/load.ts'

export type { AgentHandlers } from '../../proto/gen/hydrazine/agent/v1/Agent.ts'
export type { AgentStatus__Output as AgentStatus } from '../../proto/gen/hydrazine/agent/v1/AgentStatus.ts'
export type { AgentClient }

const load = protoLoaderFor<ProtoGrpcType>('agent.proto')

/** The service definition, for `server.addService`. */
export function agentServiceDefinition(): AgentDefinition {
  return load().hydrazine.agent.v1.Agent.service
}

/** A client of one agent (insecure channel unless `credentials` are given). */
export function createAgentClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): AgentClient {
  const Agent = load().hydrazine.agent.v1.Agent
  return new Agent(address, credentials)
}
