import * as grpc from '@grpc/grpc-js'
import { Registry } from 'prom-client'
import t from 'tap'
import { announcedCollector, ingressInstruments } from './service.ts'

const json = {
  serialize: (value: unknown) => Buffer.from(JSON.stringify(value)),
  deserialize: (bytes: Buffer): unknown => JSON.parse(bytes.toString()),
}

/** A one-method service: answers `{ok: true}`, or the status code the request names. */
const echoService = {
  Echo: {
    path: '/test.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: json.serialize,
    requestDeserialize: json.deserialize,
    responseSerialize: json.serialize,
    responseDeserialize: json.deserialize,
  },
} satisfies grpc.ServiceDefinition

t.test('gRPC calls are counted by method and status code once they end', async (t) => {
  const registry = new Registry()
  const { grpcInterceptor } = ingressInstruments(registry)
  const server = new grpc.Server({ interceptors: [grpcInterceptor] })
  server.addService(echoService, {
    Echo(
      call: grpc.ServerUnaryCall<{ fail?: number }, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) {
      const code = call.request.fail
      if (code !== undefined) callback({ code, details: 'refused' })
      else callback(null, { ok: true })
    },
  })
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  )
  t.teardown(() => server.forceShutdown())
  const Client = grpc.makeGenericClientConstructor(echoService, 'Echo')
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
  t.teardown(() => client.close())
  const call = client.Echo
  if (!call) throw new Error('the generic client has no Echo')
  const echo = (request: object) =>
    new Promise<grpc.status>((resolve) =>
      call.call(client, request, (error: grpc.ServiceError | null) =>
        resolve(error?.code ?? grpc.status.OK),
      ),
    )
  t.equal(await echo({}), grpc.status.OK)
  t.equal(await echo({}), grpc.status.OK)
  t.equal(await echo({ fail: grpc.status.NOT_FOUND }), grpc.status.NOT_FOUND)

  const values = (await registry.getSingleMetric('hydrazine_grpc_requests_total')?.get())?.values
  t.same(
    values?.map((v) => [v.labels.method, v.labels.code, v.value]),
    [
      ['/test.Echo/Echo', 'OK', 2],
      ['/test.Echo/Echo', 'NOT_FOUND', 1],
    ],
  )
})

t.test('HTTP requests and announced /32s', async (t) => {
  const registry = new Registry()
  ingressInstruments(registry).httpRequest({ method: 'GET', route: '/v1/dpus', status: 200 })
  let announced: number | undefined
  announcedCollector(registry, () => announced)
  t.match(await registry.metrics(), /^hydrazine_frr_announced_prefixes 0$/m, '0 before a read')
  announced = 7
  const text = await registry.metrics()
  t.match(text, /^hydrazine_frr_announced_prefixes 7$/m)
  t.match(
    text,
    /^hydrazine_http_requests_total\{method="GET",route="\/v1\/dpus",status="200"\} 1$/m,
  )
})
