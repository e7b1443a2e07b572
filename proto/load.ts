/**
 * Loads a `.proto` file of this folder with @grpc/proto-loader, once, as the package
 * object typed by its generated `proto/gen` types. Shared by the controller's and the
 * agent's gRPC code.
 *
 * @example
 * const load = protoLoaderFor<ProtoGrpcType>('agent.proto')
 * server.addService(load().hydrazine.agent.v1.Agent.service, handlers)
 */
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'

/** Must match the options in proto/generate.sh, or the generated types lie. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
}

export function protoLoaderFor<T>(file: string): () => T {
  const path = fileURLToPath(new URL(`./${file}`, import.meta.url))
  let loaded: T | undefined
  return () => {
    loaded ??= grpc.loadPackageDefinition(protoLoader.loadSync(path, LOADER_OPTIONS)) as T
    return loaded
  }
}
