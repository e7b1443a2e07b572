/**
 * Looking into the lab from inside its namespaces, for tests and `npm run lab`: run a
 * command in a namespace, keep IPv6 chatter out of its packet counters, wait for a
 * condition, count pings received, send pings, capture a packet.
 */
import { spawn } from 'node:child_process'
import { within } from '../../lib/process/within.ts'
import { run } from './dpu.ts'

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const quietly = (p: Promise<unknown>) => p.then(() => undefined).catch(() => undefined)

/** `ip netns exec <netns> <command…>`, throwing with its stderr on failure. */
export function netnsExec(netns: string, ...command: string[]): Promise<string> {
  return run('ip', ['netns', 'exec', netns, ...command])
}

/** Disables IPv6 in a namespace: no router solicitations to muddy packet counters. */
export async function noIpv6(netns: string): Promise<void> {
  await quietly(netnsExec(netns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1'))
  await quietly(netnsExec(netns, 'sysctl', '-qw', 'net.ipv6.conf.default.disable_ipv6=1'))
  await quietly(netnsExec(netns, 'sysctl', '-qw', 'net.ipv6.conf.eth0.disable_ipv6=1'))
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes. */
export async function eventually(
  check: () => Promise<boolean>,
  timeoutMs = 30_000,
  everyMs = 500,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return true
    if (Date.now() > deadline) return false
    await sleep(everyMs)
  }
}

/** ICMP echo requests a namespace has received (`/proc/net/snmp` Icmp InEchos). */
export async function icmpInEchos(netns: string): Promise<number> {
  const snmp = await netnsExec(netns, 'cat', '/proc/net/snmp')
  const lines = snmp.split('\n').filter((l) => l.startsWith('Icmp:'))
  const names = lines[0]?.split(/\s+/) ?? []
  const values = lines[1]?.split(/\s+/) ?? []
  return Number(values[names.indexOf('InEchos')] ?? Number.NaN)
}

/** True when `count` pings from `netns` to `target` all get answers. */
export async function pings(netns: string, target: string, count = 2): Promise<boolean> {
  try {
    await netnsExec(netns, 'ping', '-c', String(count), '-i', '0.2', '-W', '1', target)
    return true
  } catch {
    return false
  }
}

/**
 * Captures the first packet matching `filter` on `netns`'s interfaces, started before
 * `act` runs; resolves with tcpdump's line (or '' after `timeoutMs`). `netns` may be
 * `{ ifname }` instead: one interface of the root namespace (a fabric bridge port).
 */
export async function capture(
  netns: string | { readonly ifname: string },
  filter: string,
  act: () => Promise<unknown>,
  timeoutMs = 10_000,
): Promise<string> {
  const tcpdump = ['tcpdump', '-l', '-n', '-c', '1', '-i']
  const [command = 'tcpdump', ...args] =
    typeof netns === 'string'
      ? ['ip', 'netns', 'exec', netns, ...tcpdump, 'any', ...filter.split(' ')]
      : [...tcpdump, netns.ifname, ...filter.split(' ')]
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString()
  })
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString()
  })
  const done = new Promise<void>((r) => child.once('exit', () => r()))
  await eventually(async () => err.includes('listening on'), 5000, 100)
  await act()
  await within(done, timeoutMs, undefined)
  if (child.exitCode === null) child.kill('SIGKILL')
  await done
  return out.trim()
}
