/**
 * What the DPU agent throws: one class per reason a `configure` or `isolate` job cannot
 * finish, each with a stable `code`, the DPU it happened on, and whether retrying may
 * help (`retryable`).
 */
import { HydrazineError } from '../lib/errors.ts'

/** ovn-controller did not mark the port installed in time; retrying may succeed. */
export class PortNotInstalled extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly port: string,
    readonly timeoutMs: number,
  ) {
    super(
      'AGENT_PORT_NOT_INSTALLED',
      `DPU ${dpuId}: ovn-controller did not mark ${port} ovn-installed within ${timeoutMs} ms`,
      { retryable: true },
    )
  }
}

/**
 * An SB this isolate must ask refused the certificate it was asked with, or presented one
 * the CA given does not verify: credentials that will not do, not an SB that may come back
 * (the group's chassis CA was replaced since they were issued). Retryable at once: the
 * controller renews a waiting isolate with the group's current ones.
 */
export class SouthboundRefusedCredentials extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly remote: string,
    readonly tlsCode: string,
  ) {
    super(
      'AGENT_SB_CREDENTIALS_REFUSED',
      `DPU ${dpuId}: TLS with southbound ${remote} failed (${tlsCode}): the certificate or CA this job carries is not the group's current one`,
      { retryable: true },
    )
  }
}

/** ovn-controller still binds the port on this chassis after it left br-int. */
export class PortNotReleased extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly logicalPort: string,
    readonly timeoutMs: number,
  ) {
    super(
      'AGENT_PORT_NOT_RELEASED',
      `DPU ${dpuId}: after ${timeoutMs} ms, an SB still binds ${logicalPort} to this chassis or could not be asked`,
      { retryable: true },
    )
  }
}

/**
 * The job names a port that is not one of this DPU's host ports (`--host-ports`): a
 * bridge, the uplink, the management port, anything. Nothing was touched.
 */
export class HostPortNotAllowed extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly port: string,
    readonly allowed: readonly string[],
  ) {
    super(
      'AGENT_HOST_PORT_NOT_ALLOWED',
      `DPU ${dpuId}: ${port} is not one of its host ports (${allowed.join(', ')})`,
      { retryable: false },
    )
  }
}

/**
 * The host port exists in OVS and is not a Hydrazine host port: a port of another bridge
 * (never moved), or one of the integration bridge that someone else made (never
 * rewritten). Nothing was touched.
 */
export class HostPortNotOurs extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly port: string,
    readonly bridge: string | null,
  ) {
    super(
      'AGENT_HOST_PORT_NOT_OURS',
      `DPU ${dpuId}: ${port} is a port of ${bridge ?? 'no bridge'} that Hydrazine did not make ` +
        'for a host; it is never moved or rebound',
      { retryable: false },
    )
  }
}

/**
 * The host port is bound to another host's logical port. It is never rebound in place:
 * that host's `isolate` must remove it first. Retryable because that isolate may still be
 * queued behind this job; nothing was touched.
 */
export class HostPortBound extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly port: string,
    readonly boundTo: string,
    readonly wanted: string,
  ) {
    super(
      'AGENT_HOST_PORT_BOUND',
      `DPU ${dpuId}: ${port} is bound to ${boundTo}; isolate it before binding ${wanted}`,
      { retryable: true },
    )
  }
}

/** What a `configure` of `binding` (`job-order.ts`: `fabric:` for a Fabric host) waits for. */
const awaited = (binding: string) =>
  binding.startsWith('fabric:') ? "its host's routes to be announced" : "the host's flows"

/**
 * A `configure` sent before another job of the same binding (an `isolate`, or a newer
 * `configure`) that already ran on this DPU: it arrived late (a retry that waited out its
 * backoff), and running it would undo what came after. Not retried; nothing was touched.
 * Or (`queued`) one that was waiting for its host's flows (a Fabric host's: its routes
 * announced by FRR) while such a job was queued behind it: that job redoes or undoes what
 * this one did, so it stops waiting, rather than hold the DPU's queue for its install
 * timeout. Not retried either.
 */
export class JobSuperseded extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly binding: string,
    readonly sentAt: number,
    readonly laterSentAt: number,
    readonly queued = false,
  ) {
    const at = (ms: number) => new Date(ms).toISOString()
    super(
      'AGENT_JOB_SUPERSEDED',
      queued
        ? `DPU ${dpuId}: this configure of ${binding}, sent at ${at(sentAt)}, stopped waiting for ${awaited(binding)}: a job of it sent at ${at(laterSentAt)} is queued behind it and redoes or undoes it`
        : `DPU ${dpuId}: this configure of ${binding} was sent at ${at(sentAt)}, before a job of it sent at ${at(laterSentAt)} that already ran here; it would undo that job`,
      { retryable: false },
    )
  }
}

/**
 * The group's relay port name is taken on this DPU: by another group's relay, or by a
 * port that is not a relay. The holder keeps it; nothing was touched.
 */
export class RelayPortConflict extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly port: string,
    readonly group: string,
    readonly holder: string,
  ) {
    super(
      'AGENT_RELAY_PORT_CONFLICT',
      `DPU ${dpuId}: relay port ${port} for group ${group} is taken by ${holder}`,
      { retryable: false },
    )
  }
}

/** The group's Southbound is `ssl:` but this agent was started without its TLS identity. */
export class SouthboundNeedsTls extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly remote: string,
  ) {
    super(
      'AGENT_SB_NEEDS_TLS',
      `DPU ${dpuId}: southbound ${remote} needs TLS; start the agent with --tls-cert, ` +
        '--tls-key and --tls-ca',
      { retryable: false },
    )
  }
}

/**
 * `configure` asked for IPsec on the DPU's Geneve tunnels (`group.geneveIpsec`) but this
 * agent was started without its TLS identity: it has no certificate to authenticate them.
 */
export class GeneveIpsecNeedsTls extends HydrazineError {
  constructor(readonly dpuId: string) {
    super(
      'AGENT_IPSEC_NEEDS_TLS',
      `DPU ${dpuId}: IPsec on its Geneve tunnels needs a certificate; start the agent with ` +
        '--tls-cert, --tls-key and --tls-ca',
      { retryable: false },
    )
  }
}

/**
 * The certificate `configure` gave for the group's Southbound is not this DPU's: another
 * CN, another key, or not valid now. Nothing is changed.
 */
export class SouthboundCertificateRefused extends HydrazineError {
  constructor(
    readonly dpuId: string,
    why: string,
  ) {
    super('AGENT_SB_CERTIFICATE_REFUSED', `DPU ${dpuId}: group.sbCertificate ${why}`, {
      retryable: false,
    })
  }
}

/**
 * A DPU runs a single ovn-controller, so all its hosts must use the same Southbound.
 * Re-pointing it for one group would cut off another group's hosts on this DPU.
 */
export class SouthboundConflict extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly wanted: string,
    readonly inUse: string,
    readonly byGroup: string,
  ) {
    super(
      'AGENT_SB_CONFLICT',
      `DPU ${dpuId}: group ${byGroup} uses southbound ${inUse} here; cannot also follow ${wanted}`,
      { retryable: false },
    )
  }
}

/** Every relay uplink address of this DPU is in use (or none was configured). */
export class NoRelayUplink extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly group: string,
    readonly configured: number,
  ) {
    super(
      'AGENT_NO_RELAY_UPLINK',
      `DPU ${dpuId}: no free relay uplink address for group ${group} ` +
        `(${configured} configured with --relay-uplink-ips)`,
      { retryable: false },
    )
  }
}

/** The job is for another DPU: it was put on the wrong queue. */
export class WrongDpu extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly jobDpu: string,
  ) {
    super('AGENT_WRONG_DPU', `job for DPU ${jobDpu} reached the agent of ${dpuId}`, {
      retryable: false,
    })
  }
}

/** A Fabric job reached an agent with no fabric to announce to (no `--evpn-peers`). */
export class FabricNotConfigured extends HydrazineError {
  constructor(readonly dpuId: string) {
    super(
      'AGENT_FABRIC_NOT_CONFIGURED',
      `DPU ${dpuId} takes no Fabric groups' hosts: its agent runs without --evpn-peers`,
      { retryable: false },
    )
  }
}
