/**
 * `npm run bench -- ovn`: build 50 groups × 20 hosts over 20 DPUs in a private OVN NB,
 * once through lib/ovn (one read-diff-commit apply per host attach, as the host.attach
 * handler does, reading owned rows from a monitor-fed NbTopologyCache) and once the way a user would script it, one `ovn-nbctl` invocation
 * per logical change.
 *
 * build_ms: value = lib/ovn, baseline = ovn-nbctl, ratio = baseline / value (target ≥ 20).
 * attach_txn_p50_ms / attach_txn_p99_ms: one host attach through lib/ovn (target p99 < 10).
 * The ovn-nbctl baseline is run for BASELINE_GROUPS groups and extrapolated linearly; each
 * ovn-nbctl run downloads the whole NB, so the real baseline grows faster than that.
 * `HYDRAZINE_BENCH_SCALE` scales the groups and the hosts per group (0.01: one group of 2).
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import {
  applyGroupTopology,
  compileGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  NbTopologyCache,
  OvsdbClient,
  topologyNames,
} from '../../lib/ovn/index.ts'
import type { Daemon } from '../../lib/process/daemon.ts'
import { startPrivateNb } from './fixtures.ts'
import { benchScale, quantile, report, scaled, scaleNote } from './report.ts'

const run = promisify(execFile)
const GROUPS = 50
const HOSTS = 20
const DPUS = 20
const BASELINE_GROUPS = 2

function groupSpec(g: number, hosts: number): GroupTopologySpec {
  const members: GroupMember[] = Array.from({ length: hosts }, (_, h) => ({
    hostName: `h${h}`,
    logicalPort: `hz-g${g}-h${h}`,
    mac: `0a:00:00:00:${(g & 255).toString(16).padStart(2, '0')}:${(h + 2).toString(16).padStart(2, '0')}`,
    ip: `10.10.10.${h + 2}`,
    dpu: { id: `dpu-${h % DPUS}`, natIp: `172.18.${g}.${(h % DPUS) + 100}` },
    access: h % 4 === 0 ? 'PublicAccess' : 'FabricAccess',
    ...(h % 4 === 0 ? { publicIp: `203.0.${g}.${h + 1}` } : {}),
  }))
  return {
    name: `g${g}`,
    cidr: '10.10.10.0/24',
    gateway: '10.10.10.1',
    dummyFabricIp: '172.18.0.254/16',
    fabricGatewayIp: '172.18.0.1',
    members,
  }
}

/** The ovn-nbctl commands a user would run for one group, one invocation per change. */
function nbctlScript(spec: GroupTopologySpec): string[][] {
  const desired = compileGroupTopology(spec)
  const cmds: string[][] = [
    ['ls-add', topologyNames.switch(spec.name)],
    ['lr-add', topologyNames.router(spec.name)],
  ]
  const link = (ls: string, lsp: string, lr: string, lrp: string, mac: string, net: string) => {
    cmds.push(['lrp-add', lr, lrp, mac, net])
    cmds.push([
      'lsp-add',
      ls,
      lsp,
      '--',
      'lsp-set-type',
      lsp,
      'router',
      '--',
      'lsp-set-addresses',
      lsp,
      'router',
      '--',
      'lsp-set-options',
      lsp,
      `router-port=${lrp}`,
    ])
  }
  for (const r of desired.rows) {
    const row = r.row as Record<string, unknown>
    if (r.table === 'Logical_Switch' && r.key !== 'ls') cmds.push(['ls-add', String(row.name)])
    if (r.table === 'Logical_Router' && r.key !== 'lr') {
      cmds.push([
        'lr-add',
        String(row.name),
        '--',
        'set',
        'Logical_Router',
        String(row.name),
        'options:chassis=x',
      ])
    }
  }
  const lrps = new Map(
    desired.rows
      .filter((r) => r.table === 'Logical_Router_Port')
      .map((r) => [
        String((r.row as Record<string, unknown>).name),
        r.row as Record<string, unknown>,
      ]),
  )
  for (const r of desired.rows) {
    const row = r.row as Record<string, unknown>
    const parent = desired.rows.find((p) => p.key === r.parent?.key && p.table === r.parent?.table)
    const parentName = String((parent?.row as Record<string, unknown> | undefined)?.name)
    if (r.table === 'Logical_Switch_Port') {
      const opts = row.options as Record<string, string> | undefined
      const peer = opts?.['router-port']
      const lrp = peer ? lrps.get(peer) : undefined
      if (peer && lrp) {
        const lr = desired.rows.find(
          (p) =>
            p.table === 'Logical_Router' &&
            p.key ===
              desired.rows.find(
                (x) =>
                  x.table === 'Logical_Router_Port' &&
                  (x.row as Record<string, unknown>).name === peer,
              )?.parent?.key,
        )
        link(
          parentName,
          String(row.name),
          String((lr?.row as Record<string, unknown> | undefined)?.name),
          peer,
          String(lrp.mac),
          String((lrp.networks as string[])[0]),
        )
      } else if (row.type === 'localnet') {
        cmds.push([
          'lsp-add',
          parentName,
          String(row.name),
          '--',
          'lsp-set-type',
          String(row.name),
          'localnet',
          '--',
          'lsp-set-addresses',
          String(row.name),
          'unknown',
          '--',
          'lsp-set-options',
          String(row.name),
          'network_name=physnet',
        ])
      } else {
        const addr = (row.addresses as string[])[0] ?? ''
        cmds.push([
          'lsp-add',
          parentName,
          String(row.name),
          '--',
          'lsp-set-addresses',
          String(row.name),
          addr,
          '--',
          'lsp-set-port-security',
          String(row.name),
          addr,
        ])
      }
    } else if (r.table === 'Logical_Router_Static_Route') {
      cmds.push(['--ecmp', 'lr-route-add', parentName, String(row.ip_prefix), String(row.nexthop)])
    } else if (r.table === 'Logical_Router_Policy') {
      cmds.push([
        'lr-policy-add',
        parentName,
        String(row.priority),
        String(row.match),
        String(row.action),
        ...((row.nexthops as string[] | undefined) ?? []),
      ])
    } else if (r.table === 'Address_Set') {
      const addresses = (row.addresses as string[]).map((a) => JSON.stringify(a)).join(',')
      cmds.push([
        'create',
        'Address_Set',
        `name=${String(row.name)}`,
        `addresses=${addresses || '[]'}`,
      ])
    } else if (r.table === 'NAT') {
      cmds.push([
        'lr-nat-add',
        parentName,
        String(row.type),
        String(row.external_ip),
        String(row.logical_ip),
      ])
    }
  }
  return cmds
}

export default async function ovnBench(): Promise<void> {
  const scale = benchScale()
  const groups = scaled(GROUPS, scale)
  const hosts = scaled(HOSTS, scale, 2)
  const baselineGroups = Math.min(BASELINE_GROUPS, groups)
  const dir = await mkdtemp(join(tmpdir(), 'hz-bench-ovn-'))
  const daemons: Daemon[] = []
  try {
    // lib/ovn: every host attach is one applyGroupTopology of the group so far.
    const ours = await startPrivateNb(dir, 'lib')
    daemons.push(ours.daemon)
    const client = await OvsdbClient.connect(ours.remote, { echoIntervalMs: 0 })
    const cache = await NbTopologyCache.start(client)
    const attach: number[] = []
    const t0 = performance.now()
    for (let g = 0; g < groups; g++) {
      for (let h = 1; h <= hosts; h++) {
        const s = performance.now()
        await applyGroupTopology(client, groupSpec(g, h), { cache })
        attach.push(performance.now() - s)
      }
    }
    const libMs = performance.now() - t0
    await cache.close()
    await client.close()

    // Baseline: one ovn-nbctl invocation per logical change.
    const theirs = await startPrivateNb(dir, 'nbctl')
    daemons.push(theirs.daemon)
    const t1 = performance.now()
    let invocations = 0
    for (let g = 0; g < baselineGroups; g++) {
      for (const cmd of nbctlScript(groupSpec(g, hosts))) {
        await run('ovn-nbctl', [`--db=${theirs.remote}`, ...cmd])
        invocations++
      }
    }
    const baselineMs = ((performance.now() - t1) * groups) / baselineGroups
    report({
      suite: 'ovn',
      metric: 'build_ms',
      value: libMs,
      unit: 'ms',
      baseline: baselineMs,
      ratio: baselineMs / libMs,
      note: `${groups} groups x ${hosts} hosts over ${Math.min(DPUS, hosts)} DPUs; lib/ovn = ${groups * hosts} per-host applies; baseline = ovn-nbctl per change, ${invocations} invocations for ${baselineGroups} groups extrapolated x${groups / baselineGroups}; target ratio >= 20${scaleNote(scale)}`,
    })
    report({
      suite: 'ovn',
      metric: 'attach_txn_p50_ms',
      value: quantile(attach, 0.5),
      unit: 'ms',
      note: `read-diff-commit of one host attach${scaleNote(scale)}`,
    })
    report({
      suite: 'ovn',
      metric: 'attach_txn_p99_ms',
      value: quantile(attach, 0.99),
      unit: 'ms',
      note: `target < 10 ms${scaleNote(scale)}`,
    })
  } finally {
    for (const d of daemons) await d.stop()
    await rm(dir, { recursive: true, force: true })
  }
}
