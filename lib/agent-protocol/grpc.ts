/**
 * The agent's gRPC service (`proto/agent.proto`), loaded with @grpc/proto-loader and
 * typed by the generated `proto/gen` types. The agent serves it; the controller uses
 * `createAgentClient`.
 *
 * @example
 * const client = createAgentClient('10.0.0.2:50151')
 * client.getStatus({}, (err, status) => console.log(status?.boundPorts))
 */
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import type { ProtoGrpcType } from '../../proto/gen/agent.ts'
import type { AgentClient, AgentDefinition } from '../../proto/gen/hydrazine/agent/v1/Agent.ts'

export type { AgentHandlers } from '../../proto/gen/hydrazine/agent/v1/Agent.ts'
export type { AgentStatus__Output as AgentStatus } from '../../proto/gen/hydrazine/agent/v1/AgentStatus.ts'
export type { AgentClient }

const PROTO = fileURLToPath(new URL('../../proto/agent.proto', import.meta.url))

/** Must match the options in proto/generate.sh. */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
}

let loaded: ProtoGrpcType | undefined

function load(): ProtoGrpcType {
  loaded ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(PROTO, LOADER_OPTIONS),
  ) as unknown as ProtoGrpcType
  return loaded
}

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
