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

/** ovn-controller still binds the port on this chassis after it left br-int. */
export class PortNotReleased extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly logicalPort: string,
    readonly timeoutMs: number,
  ) {
    super(
      'AGENT_PORT_NOT_RELEASED',
      `DPU ${dpuId}: the SB still binds ${logicalPort} to this chassis after ${timeoutMs} ms`,
      { retryable: true },
    )
  }
}

/** The job names no host port and the agent has no default. */
export class NoHostPort extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly host: string,
  ) {
    super('AGENT_NO_HOST_PORT', `DPU ${dpuId}: no host port for ${host}`)
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
    )
  }
}

/** The job is for another DPU: it was put on the wrong queue. */
export class WrongDpu extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly jobDpu: string,
  ) {
    super('AGENT_WRONG_DPU', `job for DPU ${jobDpu} reached the agent of ${dpuId}`)
  }
}
