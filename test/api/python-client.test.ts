/**
 * Proven by a client that is not ours: Python stubs generated from `proto/` with Debian's
 * `protoc` and `grpc_python_plugin` (protobuf-compiler, protobuf-compiler-grpc; the
 * well-known types from python3-grpc-tools; run by python3-grpcio and python3-protobuf,
 * all installed by `infra/bootstrap.sh`, nothing at test time) drive a running Hydrazine
 * (`python/hydrazine_client.py`): health SERVING, the services listed through reflection,
 * a dual-stack group and a host created with typed messages, the host watched until Ready
 * (with its SLAAC address), the group's address map read (`GetResourceGroupIpam`), and a
 * bad CIDR answered with a `google.rpc.BadRequest` naming `spec.network.cidr`.
 */
import { execFile } from 'node:child_process'
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { PROTO_DIR } from '../../proto/load.ts'
import { startPipeline } from '../pipeline/fixtures.ts'
import { OPERATOR, startIngress } from './grpc-fixture.ts'

const run = promisify(execFile)
/** Debian's interpreter, where python3-grpcio and python3-protobuf are installed. */
const PYTHON = '/usr/bin/python3'
const CLIENT = fileURLToPath(new URL('./python/hydrazine_client.py', import.meta.url))

/**
 * Generates the Python modules of Hydrazine's protos into `out`. The vendored gRPC
 * health and reflection protos are compiled from `grpc_health/` and `grpc_reflection/`
 * (as grpcio's own packages have them): Python's `grpc` package owns `grpc.*` modules.
 */
async function generate(out: string): Promise<void> {
  const renamed = join(out, 'src')
  for (const [from, to] of [
    ['grpc/health/v1/health.proto', 'grpc_health/v1/health.proto'],
    ['grpc/reflection/v1/reflection.proto', 'grpc_reflection/v1/reflection.proto'],
  ] as const) {
    await mkdir(join(renamed, to, '..'), { recursive: true })
    await copyFile(join(PROTO_DIR, from), join(renamed, to))
  }
  const { stdout: wellKnown } = await run(PYTHON, [
    '-c',
    'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))',
  ])
  await run('protoc', [
    `-I${PROTO_DIR}`,
    `-I${renamed}`,
    `-I${wellKnown.trim()}`,
    `--python_out=${out}`,
    `--grpc_python_out=${out}`,
    '--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin',
    'hydrazine/v1/resources.proto',
    'hydrazine/v1/trace.proto',
    'hydrazine/v1/ipam.proto',
    'hydrazine/v1/hydrazine.proto',
    'google/rpc/status.proto',
    'google/rpc/error_details.proto',
    'grpc_health/v1/health.proto',
    'grpc_reflection/v1/reflection.proto',
  ])
}

t.test('a Python client generated from proto/ drives Hydrazine', async (t) => {
  const out = await mkdtemp(join(tmpdir(), 'hz-python-'))
  t.teardown(() => rm(out, { recursive: true, force: true }))
  await generate(out)

  const p = await startPipeline(t)
  await p.agent('dpu-py')
  const { port } = await startIngress(t, p, { readiness: { redis: async () => true } })

  const { stdout } = await run(PYTHON, [CLIENT], {
    env: { ...process.env, PYTHONPATH: out, HZ_ADDR: `127.0.0.1:${port}`, HZ_TOKEN: OPERATOR },
    timeout: 120_000,
  })
  const seen = JSON.parse(stdout)
  t.equal(seen.health, 'SERVING', 'grpc.health.v1: SERVING')
  t.match(seen.services, ['grpc.health.v1.Health', 'hydrazine.v1.HydrazineService'])
  t.same(seen.group, { name: 'group-py', tenant: 'tenant-py', job: true }, 'a typed group')
  t.match(seen.bad, {
    code: 'INVALID_ARGUMENT',
    reason: 'hydrazine.dev/INVALID',
    violations: [{ field: 'spec.network.cidr', description: /CIDR/ }],
  })
  t.equal(seen.first_event, 'WATCH_EVENT_TYPE_BOOKMARK', 'the empty snapshot ends in a bookmark')
  t.match(seen.ready, {
    resource_version: /^\d+-\d+$/,
    fabric_ip: '172.18.0.160',
    host_ipv6: 'fd00:60::5054:ff:fe00:6001',
    configs_synced: true,
    host_access: 'HOST_ACCESS_FABRIC_ACCESS',
  })
  t.ok(Number(seen.ready.created_at_s) > 1_600_000_000, 'times are Timestamps')
  t.equal(seen.phases.at(-1), 'MANAGED_RESOURCE_PHASE_READY', 'watched until Ready')
  t.same(
    seen.ipam,
    {
      subnets: [
        { cidr: '10.60.0.0/24', used: 1 },
        { cidr: 'fd00:60::/64', used: 1 },
      ],
      owners: ['host-py', 'ipv6/host-py'],
    },
    "the group's address map, typed: both of the dual-stack host's addresses",
  )
})
