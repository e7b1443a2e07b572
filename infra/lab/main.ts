/**
 * `npm run lab -- up|down|status`: the whole system on a simulated data centre.
 *
 * - `up` starts the lab in a background process (`serve`), waits until it is ready,
 *   prints its status and returns; the lab keeps running.
 * - `status` prints the hosts, their addresses and how to get a shell in each, and each
 *   resource group's OVN central (Hydrazine runs one per group, as `npm start` does).
 * - `down` stops the background process (which stops every daemon it started) and
 *   removes every namespace and link the lab made, even after a crash.
 *
 * The lab's files live in `HYDRAZINE_LAB_DIR` (default `./.hydrazine-lab`).
 */
import { spawn } from 'node:child_process'
import { openSync } from 'node:fs'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isAlive } from '../../lib/process/pids.ts'
import { labPrefix } from './dpu.ts'
import { type LabState, labUnavailable, removeLabLeftovers, startLab } from './lab.ts'
import { eventually } from './probes.ts'

const dataDir = resolve(process.env.HYDRAZINE_LAB_DIR ?? './.hydrazine-lab')
const statePath = `${dataDir}/lab-state.json`
const readyPath = `${dataDir}/lab-ready`
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

async function readState(): Promise<LabState | undefined> {
  try {
    return JSON.parse(await readFile(statePath, 'utf8')) as LabState
  } catch {
    return undefined
  }
}

async function up(): Promise<number> {
  const existing = await readState()
  if (existing && isAlive(existing.labPid)) {
    process.stdout.write(`the lab is already up (pid ${existing.labPid})\n`)
    return status()
  }
  const why = await labUnavailable()
  if (why) {
    process.stderr.write(`lab: cannot run here: ${why}\n`)
    return 1
  }
  if (existing) await down()
  // A fresh start: the DPUs' databases and Hydrazine's state are not reused.
  await rm(dataDir, { recursive: true, force: true })
  await mkdir(dataDir, { recursive: true })
  await rm(readyPath, { force: true })
  const out = openSync(`${dataDir}/lab.log`, 'a')
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'serve'],
    { detached: true, stdio: ['ignore', out, out], env: process.env },
  )
  child.unref()
  process.stdout.write(`starting the lab (pid ${child.pid}); log: ${dataDir}/lab.log\n`)
  const ready = await eventually(
    async () => (await readFile(readyPath, 'utf8').catch(() => '')) !== '',
    180_000,
    1000,
  )
  if (!ready || child.pid === undefined || !isAlive(child.pid)) {
    process.stderr.write(`lab: did not come up; see ${dataDir}/lab.log\n`)
    return 1
  }
  return status()
}

async function serve(): Promise<void> {
  const lab = await startLab({
    dataDir,
    prefix: labPrefix(),
    log: (line) => process.stdout.write(`${line}\n`),
  })
  // A person's starting point: the three DPUs and a host on each, not yet attached.
  await lab.addHost({ dpu: 1, name: 'h1', mac: '0a:00:00:00:0a:01', ipCidr: '10.10.10.11/24' })
  await lab.addHost({ dpu: 2, name: 'h2', mac: '0a:00:00:00:0a:02', ipCidr: '10.10.10.12/24' })
  await lab.addHost({ dpu: 3, name: 'h3', mac: '0a:00:00:00:0b:01', ipCidr: '10.10.10.11/24' })
  // The daemons' pipes are unref'd: keep this process (and so the lab) alive until told.
  const keepAlive = setInterval(() => {}, 60_000)
  const stopAndExit = async () => {
    clearInterval(keepAlive)
    await lab.stop()
    await rm(readyPath, { force: true })
    process.exit(0)
  }
  process.once('SIGTERM', () => void stopAndExit())
  process.once('SIGINT', () => void stopAndExit())
  await writeFile(readyPath, `${new Date().toISOString()}\n`)
  process.stdout.write('lab is up\n')
}

/**
 * A line per resource group with its OVN central, as the group's status tells
 * (`ovnCentral`); asked of the API, so undefined when it does not answer.
 */
async function centralLines(s: LabState): Promise<string[] | undefined> {
  if (!s.url || !s.tokenFile || !isAlive(s.labPid)) return undefined
  try {
    const token = (await readFile(s.tokenFile, 'utf8')).trim()
    const res = await fetch(`${s.url}/v1/resource-groups`, {
      headers: { authorization: `Bearer ${token}` },
    })
    const { items = [] } = (await res.json()) as {
      items?: { name: string; status?: { ovnCentral?: { nb: string; sb: string } } }[]
    }
    if (items.length === 0) return ['    (no resource group yet)']
    return items.map((g) => {
      const central = g.status?.ovnCentral
      return central
        ? `    ${g.name}: SB ${central.sb}   ovn-nbctl --db=${central.nb} show`
        : `    ${g.name}: no central yet`
    })
  } catch {
    return undefined
  }
}

async function status(): Promise<number> {
  const s = await readState()
  if (!s) {
    process.stdout.write(`no lab in ${dataDir}\n`)
    return 1
  }
  const centrals = await centralLines(s)
  const lines = [
    `lab ${s.prefix} (pid ${s.labPid}, ${isAlive(s.labPid) ? 'running' : 'NOT running'})`,
    `  data:            ${s.dataDir}`,
    ...(s.url ? [`  Hydrazine API:   ${s.url}   (token: ${s.tokenFile})`] : []),
    ...(s.url && s.tokenFile
      ? [`  try:            curl -H "authorization: Bearer $(cat ${s.tokenFile})" ${s.url}/v1/dpus`]
      : []),
    ...(s.fabric
      ? [`  fabric:          ${s.fabric.bridge}, Hydrazine at ${s.fabric.gatewayIp}`]
      : []),
    ...(s.router
      ? [
          `  fabric router:   ${s.router.ip}  ip netns exec ${s.router.netns} bash`,
          `                   vtysh --vty_socket ${s.dataDir}/fabric-frr -c 'show ip bgp'`,
        ]
      : []),
    ...(s.centralsDir
      ? [`  OVN centrals:    one per resource group, in ${s.centralsDir}`, ...(centrals ?? [])]
      : []),
    '  DPUs:',
    ...s.dpus.map(
      (d) => `    ${d.id}: encap ${d.encapIp}, NAT ${d.natIp}   ip netns exec ${d.netns} bash`,
    ),
    '  hosts (attach with PUT /v1/managed-resources/NAME, identifier = host port):',
    ...s.hosts.map(
      (h) =>
        `    ${h.name} on ${h.dpu}: mac ${h.mac}, host port ${h.hostPort}   ip netns exec ${h.netns} bash`,
    ),
  ]
  process.stdout.write(`${lines.join('\n')}\n`)
  return 0
}

async function down(): Promise<number> {
  const s = await readState()
  if (!s) {
    process.stdout.write(`no lab in ${dataDir}\n`)
    return 0
  }
  if (isAlive(s.labPid) && s.labPid !== process.pid) {
    process.kill(s.labPid, 'SIGTERM')
    if (!(await eventually(async () => !isAlive(s.labPid), 60_000, 500))) {
      process.kill(s.labPid, 'SIGKILL')
      await sleep(4000) // the reapers SIGKILL their daemons 3 s after their parent dies
    }
  }
  await removeLabLeftovers(s.prefix)
  await rm(statePath, { force: true })
  await rm(readyPath, { force: true })
  process.stdout.write(`lab ${s.prefix} is down\n`)
  return 0
}

const command = process.argv[2] ?? ''
const commands: Record<string, () => Promise<number | undefined>> = {
  up,
  down,
  status,
  serve: async () => {
    await serve()
    return undefined
  },
}
const fn = commands[command]
if (!fn) {
  process.stderr.write('usage: npm run lab -- up|down|status\n')
  process.exit(2)
}
const code = await fn()
if (code !== undefined) process.exit(code)
