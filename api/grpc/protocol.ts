/**
 * Hydrazine's ingress gRPC service (`proto/hydrazine/v1/hydrazine.proto`,
 * `hydrazine.v1.HydrazineService`), loaded with @grpc/proto-loader and typed by the
 * generated `proto/gen` types. The controller serves it (`server.ts`); other systems
 * connect with `createHydrazineClient` (or their own stubs generated from `proto/`).
 *
 * @example
 * const client = createHydrazineClient('hydrazine:8081')
 * const md = new grpc.Metadata()
 * md.set('authorization', `Bearer ${token}`)
 * client.getResourceGroup({ name: 'group-a' }, md, (err, res) => console.log(res?.resourceGroup?.status?.phase))
 */
import * as grpc from '@grpc/grpc-js'
import type {
  HydrazineServiceClient,
  HydrazineServiceDefinition,
} from '../../proto/gen/hydrazine/v1/HydrazineService.ts'
import type { ProtoGrpcType } from '../../proto/gen/hydrazine.ts'
import { packageDefinition, protoLoaderFor } from '../../proto/load.ts'

export type { HydrazineServiceHandlers } from '../../proto/gen/hydrazine/v1/HydrazineService.ts'
export type { WatchResponse__Output as WatchEvent } from '../../proto/gen/hydrazine/v1/WatchResponse.ts'
export type { HydrazineServiceClient }

/** The ingress service's proto file, by its import path under `proto/`. */
export const HYDRAZINE_PROTO = 'hydrazine/v1/hydrazine.proto'
/** Its full name, as health checks and reflection know it. */
export const HYDRAZINE_SERVICE = 'hydrazine.v1.HydrazineService'

const load = protoLoaderFor<ProtoGrpcType>(HYDRAZINE_PROTO)

/** The service definition, for `server.addService`. */
export function hydrazineServiceDefinition(): HydrazineServiceDefinition {
  return load().hydrazine.v1.HydrazineService.service
}

/** The package definition (its descriptors), for server reflection. */
export function hydrazinePackageDefinition() {
  return packageDefinition(HYDRAZINE_PROTO)
}

/** A client of Hydrazine's gRPC ingress (insecure channel unless `credentials` are given). */
export function createHydrazineClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): HydrazineServiceClient {
  const HydrazineService = load().hydrazine.v1.HydrazineService
  return new HydrazineService(address, credentials)
}
