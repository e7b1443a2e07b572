/**
 * A gRPC ingress over a test pipeline, and a client of it whose calls never reject:
 * `call` answers `{res}` or `{error}`, `watch` collects a stream's events.
 */
import * as grpc from '@grpc/grpc-js'
import { createHydrazineClient, type WatchEvent } from '../../api/grpc/protocol.ts'
import { createGrpcServer, type GrpcDeps } from '../../api/grpc/server.ts'
import type { Teardown } from '../helpers/stack.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import { dpuFabricIps, type Pipeline } from '../pipeline/fixtures.ts'

export { OPERATOR, TENANT_A, TENANT_B }

/** The unary methods of the client. */
export type Method =
  | 'applyResourceGroup'
  | 'getResourceGroup'
  | 'getResourceGroupIpam'
  | 'listResourceGroups'
  | 'deleteResourceGroup'
  | 'applyManagedResource'
  | 'getManagedResource'
  | 'listManagedResources'
  | 'deleteManagedResource'
  | 'registerPublicIp'
  | 'getPublicIp'
  | 'listPublicIps'
  | 'unregisterPublicIp'
  | 'applyDpu'
  | 'getDpu'
  | 'listDpus'
  | 'deleteDpu'
  | 'issueDpuCredentials'
  | 'trace'

export interface Answer {
  // biome-ignore lint/suspicious/noExplicitAny: responses are inspected loosely in tests
  res?: any
  error?: grpc.ServiceError
}

/** A ManagedResourceSpec message as an operator sends it (`hostSpec` of the pipeline tests). */
export function hostMessage(
  group: string,
  dpu: string,
  n: number,
  extra: Record<string, unknown> = {},
) {
  return {
    resourceGroup: group,
    hostMac: `52:54:00:00:${dpu.length.toString(16).padStart(2, '0')}:${n.toString(16).padStart(2, '0')}`,
    dpu: { id: dpu, ips: dpuFabricIps(dpu) },
    ...extra,
  }
}

export function metadataOf(token: string | undefined): grpc.Metadata {
  const md = new grpc.Metadata()
  if (token !== undefined) md.set('authorization', `Bearer ${token}`)
  return md
}

export async function startIngress(
  t: Teardown,
  p: Pipeline,
  options: Omit<GrpcDeps, 'client' | 'tokens'> = {},
) {
  const ingress = createGrpcServer({ client: p.client, tokens: TEST_TOKENS, ...options })
  const port = await ingress.bind('127.0.0.1:0')
  t.teardown(() => ingress.close())
  const client = createHydrazineClient(`127.0.0.1:${port}`)
  t.teardown(() => client.close())

  /** One unary call as `token` (default the operator; `undefined`: none); never rejects. */
  const call = (method: Method, request: object, ...as: [token?: string | undefined]) =>
    new Promise<Answer>((resolve) => {
      const token = as.length > 0 ? as[0] : OPERATOR
      const fn = client[method].bind(client) as unknown as (
        req: object,
        md: grpc.Metadata,
        cb: (error: grpc.ServiceError | null, res?: unknown) => void,
      ) => void
      fn(request, metadataOf(token), (error, res) => resolve(error ? { error } : { res }))
    })

  /** A Watch stream collecting its events; `end()` cancels it. */
  const watch = (request: object, ...as: [token?: string | undefined]) => {
    const token = as.length > 0 ? as[0] : OPERATOR
    const events: WatchEvent[] = []
    const stream = client.watch(request, metadataOf(token))
    const closed = new Promise<grpc.StatusObject | grpc.ServiceError>((resolve) => {
      stream.on('error', (e: grpc.ServiceError) => resolve(e))
      stream.on('status', (s: grpc.StatusObject) => resolve(s))
    })
    stream.on('data', (e: WatchEvent) => events.push(e))
    const end = () => stream.cancel()
    t.teardown(end)
    return { events, closed, end, stream }
  }

  return { call, watch, client, ingress, port }
}
