/**
 * The agent's gRPC service (`proto/hydrazine/agent/v1/agent.proto`,
 * `hydrazine.agent.v1.AgentService`), loaded with @grpc/proto-loader and typed by the
 * generated `proto/gen` types. The agent serves it; the controller uses
 * `createAgentClient`.
 *
 * @example
 * const client = createAgentClient('10.0.0.2:50151')
 * client.getStatus({}, (err, status) => console.log(status?.boundPorts))
 */
import * as grpc from '@grpc/grpc-js'
import type { ProtoGrpcType } from '../../proto/gen/agent.ts'
import type {
  AgentServiceClient as AgentClient,
  AgentServiceDefinition,
} from '../../proto/gen/hydrazine/agent/v1/AgentService.ts'
import { protoLoaderFor } from '../../proto/load.ts'

export type { AgentServiceHandlers as AgentHandlers } from '../../proto/gen/hydrazine/agent/v1/AgentService.ts'
export type { GetStatusResponse__Output as AgentStatus } from '../../proto/gen/hydrazine/agent/v1/GetStatusResponse.ts'
export type { AgentClient }

/** The agent service's proto file, by its import path under `proto/`. */
export const AGENT_PROTO = 'hydrazine/agent/v1/agent.proto'

const load = protoLoaderFor<ProtoGrpcType>(AGENT_PROTO)

/** The service definition, for `server.addService`. */
export function agentServiceDefinition(): AgentServiceDefinition {
  return load().hydrazine.agent.v1.AgentService.service
}

/** A client of one agent (insecure channel unless `credentials` are given). */
export function createAgentClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): AgentClient {
  const AgentService = load().hydrazine.agent.v1.AgentService
  return new AgentService(address, credentials)
}
