/**
 * Hydrazine's ingress gRPC service (`proto/hydrazine.proto`), loaded with
 * @grpc/proto-loader and typed by the generated `proto/gen` types. The controller serves
 * it (`server.ts`); other systems connect with `createHydrazineClient`.
 *
 * @example
 * const client = createHydrazineClient('hydrazine:50051')
 * const md = new grpc.Metadata()
 * md.set('authorization', `Bearer ${token}`)
 * client.getResourceGroup({ name: 'group-a' }, md, (err, res) => console.log(res?.objectJson))
 */
import * as grpc from '@grpc/grpc-js'
import type {
  HydrazineDefinition,
  HydrazineClient as HydrazineGrpcClient,
} from '../../proto/gen/hydrazine/v1/Hydrazine.ts'
import type { ProtoGrpcType } from '../../proto/gen/hydrazine.ts'
import { protoLoaderFor } from '../../proto/load.ts'

export type { HydrazineHandlers } from '../../proto/gen/hydrazine/v1/Hydrazine.ts'
export type { ObjectEvent__Output as ObjectEvent } from '../../proto/gen/hydrazine/v1/ObjectEvent.ts'
export type { HydrazineGrpcClient }

const load = protoLoaderFor<ProtoGrpcType>('hydrazine.proto')

/** The service definition, for `server.addService`. */
export function hydrazineServiceDefinition(): HydrazineDefinition {
  return load().hydrazine.v1.Hydrazine.service
}

/** A client of Hydrazine's gRPC ingress (insecure channel unless `credentials` are given). */
export function createHydrazineClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): HydrazineGrpcClient {
  const Hydrazine = load().hydrazine.v1.Hydrazine
  return new Hydrazine(address, credentials)
}
