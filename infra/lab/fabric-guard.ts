/**
 * The lab fabric's source guard: what a data-centre switch does at its edge ports (IP
 * source guard, ARP inspection), as an nftables `bridge` table on the lab's fabric bridge.
 * A DPU's encap address may appear as an IPv4 source, or as an ARP sender, only on the
 * bridge port that DPU's uplink is plugged into; and no port sends VLAN-tagged frames (the
 * lab's fabric carries none, and a tag would hide the IPv4 header from the rules). Every
 * other frame passes untouched.
 *
 * It is the stand-in for IPsec on the Geneve tunnels where IPsec cannot run (the lab's
 * kernel has no ESP, and OVS's userspace datapath sends its tunnels past the kernel's
 * IPsec): a fabric host can no longer forge Geneve in a DPU's name. It does not hide the
 * tunnels' contents from anyone on the path, and it holds only where the fabric enforces
 * it (docs/security.md).
 *
 * The table is named from the lab's prefix (`<prefix>guard`), and its rules match the
 * bridge's own ports only: the root namespace's bridge family sees every bridge's frames,
 * other labs' included.
 */
import { run } from './dpu.ts'

/** One DPU on the fabric: the bridge port its uplink is plugged into, and its encap IP. */
export interface GuardedDpu {
  readonly port: string
  readonly encapIp: string
}

/**
 * The nftables script (`nft -f -`) that puts the guard in place, replacing a previous
 * one of the same name: `ports` are every port of the fabric bridge.
 *
 * @example fabricGuardScript('hzab1guard', ['hzab1dpu1u', 'hzab1r'], [{ port: 'hzab1dpu1u', encapIp: '100.64.3.2' }])
 */
export function fabricGuardScript(
  table: string,
  ports: readonly string[],
  dpus: readonly GuardedDpu[],
): string {
  if (ports.length === 0) throw new Error('a fabric guard needs the bridge ports')
  const quoted = (name: string) => `"${name}"`
  const encaps = dpus.map((d) => d.encapIp)
  const sources = dpus.map((d) => `${quoted(d.port)} . ${d.encapIp}`)
  return [
    `table bridge ${table}`,
    `delete table bridge ${table}`,
    `table bridge ${table} {`,
    `  set ports { type ifname; elements = { ${ports.map(quoted).join(', ')} } }`,
    ...(dpus.length > 0
      ? [
          `  set encaps { type ipv4_addr; elements = { ${encaps.join(', ')} } }`,
          `  set sources { type ifname . ipv4_addr; elements = { ${sources.join(', ')} } }`,
        ]
      : []),
    '  chain guard {',
    '    type filter hook prerouting priority -200; policy accept;',
    '    iifname @ports ether type { 8021q, 8021ad } counter drop',
    ...(dpus.length > 0
      ? [
          '    iifname @ports ip saddr @encaps iifname . ip saddr != @sources counter drop',
          '    iifname @ports arp saddr ip @encaps iifname . arp saddr ip != @sources counter drop',
        ]
      : []),
    '  }',
    '}',
    '',
  ].join('\n')
}

/** The ports of Linux bridge `bridge` (in the root namespace). */
export async function bridgePorts(bridge: string): Promise<string[]> {
  const out = await run('ip', ['-o', 'link', 'show', 'master', bridge])
  return out
    .split('\n')
    .map((line) => /^\d+: ([^:@\s]+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined)
}

/** Puts the guard on `bridge` (its ports as they are now), replacing an earlier one. */
export async function guardFabric(
  table: string,
  bridge: string,
  dpus: readonly GuardedDpu[],
): Promise<void> {
  await nft(fabricGuardScript(table, await bridgePorts(bridge), dpus))
}

/** Takes the guard away (nothing when there is none). */
export async function unguardFabric(table: string): Promise<void> {
  await nft(`table bridge ${table}\ndelete table bridge ${table}\n`)
}

/** `nft -f -` with `script` on its standard input: one atomic transaction. */
async function nft(script: string): Promise<void> {
  await run('sh', ['-c', 'printf "%s" "$1" | nft -f -', 'nft', script])
}
