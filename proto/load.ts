/**
 * Loads Hydrazine's `.proto` files (under this folder, by import path) with
 * @grpc/proto-loader, once each, as the package object typed by their generated
 * `proto/gen` types; and as protobufjs descriptors, for what needs the schema itself
 * (encoding `google.rpc.Status` details, checking the proto against the valibot model).
 * Shared by the controller's and the agent's gRPC code.
 *
 * @example
 * const load = protoLoaderFor<ProtoGrpcType>('hydrazine/agent/v1/agent.proto')
 * server.addService(load().hydrazine.agent.v1.AgentService.service, handlers)
 */
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import protobuf from 'protobufjs'

/** This folder: the root every `.proto` import path is relative to. */
export const PROTO_DIR = fileURLToPath(new URL('.', import.meta.url))

/** Must match the options in proto/generate.sh, or the generated types lie. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
}

const definitions = new Map<string, protoLoader.PackageDefinition>()

/** The package definition of `file` (e.g. `hydrazine/v1/hydrazine.proto`), loaded once. */
export function packageDefinition(file: string): protoLoader.PackageDefinition {
  let definition = definitions.get(file)
  if (!definition) {
    definition = protoLoader.loadSync(file, LOADER_OPTIONS)
    definitions.set(file, definition)
  }
  return definition
}

/** A loader of `file`'s gRPC package object, typed `T` by its generated types. */
export function protoLoaderFor<T>(file: string): () => T {
  let loaded: T | undefined
  return () => {
    loaded ??= grpc.loadPackageDefinition(packageDefinition(file)) as T
    return loaded
  }
}

/**
 * `files` parsed by protobufjs into one resolved Root (imports found under this folder;
 * `google/protobuf/*` are protobufjs's own).
 */
export function protoRoot(...files: string[]): protobuf.Root {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) =>
    target.startsWith('/') ? target : join(PROTO_DIR, target)
  root.loadSync(files, { keepCase: true })
  root.resolveAll()
  return root
}

/** A time as `google.protobuf.Timestamp` (whole seconds as a string, and nanos). */
export function timestampOf(time: string | Date): { seconds: string; nanos: number } {
  const ms = typeof time === 'string' ? Date.parse(time) : time.getTime()
  if (Number.isNaN(ms)) return { seconds: '0', nanos: 0 }
  const seconds = Math.floor(ms / 1000)
  return { seconds: String(seconds), nanos: (ms - seconds * 1000) * 1_000_000 }
}
