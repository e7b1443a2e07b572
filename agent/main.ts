/**
 * The DPU agent process: `npm run agent -- --dpu-id dpu-1 --ovs-db unix:/var/run/openvswitch/db.sock
 * --fabric-ips 10.0.0.2 --host-ports pf0hpf,pf1hpf --redis-url redis://controller:6379`
 * (every flag also has an environment variable; `--help` lists them). Stops cleanly on
 * SIGTERM/SIGINT. A configuration mistake exits 2, any other start-up failure 1; both
 * logged without the Redis password.
 */
import { ConfigError } from '../lib/errors.ts'
import { type AgentConfig, parseAgentConfig, redactingLog, usage } from './config.ts'
import { type AgentRuntime, startAgentRuntime } from './runtime.ts'

const argv = process.argv.slice(2).filter((a) => a !== '--')
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(`usage: npm run agent -- [flags]  (flag, environment variable, meaning)\n${usage()}`)
  process.exit(0)
}

let config: AgentConfig
try {
  config = parseAgentConfig(argv)
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`hydrazine agent: ${err.message}`)
    process.exit(2)
  }
  throw err
}

const log = redactingLog(config, (line: string) =>
  console.log(`${new Date().toISOString()} agent(${config.dpuId}) ${line}`),
)
let runtime: AgentRuntime
try {
  runtime = await startAgentRuntime(config, log)
} catch (err) {
  if (err instanceof ConfigError) {
    log(`hydrazine agent: ${err.message}`)
    process.exit(2)
  }
  log(`start-up failed: ${String(err)}`)
  process.exit(1)
}
log(
  `ready: queue agent-${config.dpuId}, gRPC ${runtime.grpcAddress}` +
    (runtime.metricsUrl ? `, metrics ${runtime.metricsUrl}` : ''),
)

let stopping = false
const shutdown = (signal: string) => {
  if (stopping) return
  stopping = true
  log(`${signal}: stopping`)
  runtime.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  )
}
process.on('SIGTERM', () => shutdown('SIGTERM'))
process.on('SIGINT', () => shutdown('SIGINT'))
