/**
 * A Geneve frame as an OVN chassis sends it, forged: what a host on the fabric can send
 * in a DPU's name, to show where it is stopped. The outer IPv4 header carries the DPU's
 * encap address as its source; the Geneve header carries a datapath's tunnel key (its
 * VNI) and OVN's option (class 0x0102, type 0x80) with the logical ingress and egress
 * port keys; inside is an Ethernet frame to a host, with a UDP datagram whose payload
 * the test looks for on that host.
 *
 * python3 sends it as a whole Ethernet frame through a packet socket, to the MAC address
 * the receiving DPU's tunnel endpoint answers on (its uplink bridge's, where a DPU sends
 * it): scapy is not needed.
 */
import { netnsExec } from './probes.ts'

/** OVN's Geneve option: class 0x0102 (OVN), type 0x80, 4 bytes of port keys. */
const OVN_GENEVE_CLASS = 0x0102
const OVN_GENEVE_TYPE = 0x80
const GENEVE_PORT = 6081
/** Transparent Ethernet bridging: the Geneve payload is an Ethernet frame. */
const ETH_BRIDGING = 0x6558

export interface ForgedGeneve {
  /** Outer addresses: the DPU whose name is taken, and the DPU it is sent to. */
  readonly src: string
  readonly dst: string
  /** The logical switch's tunnel key (SB `Datapath_Binding`), as the VNI. */
  readonly datapathKey: number
  /** The logical ingress and egress ports' tunnel keys (SB `Port_Binding`). */
  readonly inportKey: number
  readonly outportKey: number
  /** The inner frame: to `dstMac`/`dstIp`, UDP to `dstPort`, carrying `payload`. */
  readonly inner: {
    readonly srcMac: string
    readonly dstMac: string
    readonly srcIp: string
    readonly dstIp: string
    readonly dstPort: number
    readonly payload: string
  }
}

/** The outer IPv4 packet (header, UDP, Geneve, inner frame) of `f`. */
export function forgedGenevePacket(f: ForgedGeneve): Buffer {
  const { inner } = f
  const data = Buffer.from(inner.payload)
  const innerUdp = udp(40000, inner.dstPort, data)
  const innerIp = ipv4(inner.srcIp, inner.dstIp, innerUdp)
  const frame = Buffer.concat([mac(inner.dstMac), mac(inner.srcMac), u16(0x0800), innerIp])
  const option = Buffer.alloc(8)
  option.writeUInt16BE(OVN_GENEVE_CLASS, 0)
  option.writeUInt8(OVN_GENEVE_TYPE, 2)
  option.writeUInt8(1, 3) // length in 4-byte words
  option.writeUInt32BE((((f.inportKey & 0x7fff) << 16) | (f.outportKey & 0xffff)) >>> 0, 4)
  const geneve = Buffer.alloc(8)
  geneve.writeUInt8(option.length / 4, 0) // version 0, options length in 4-byte words
  geneve.writeUInt8(0x40, 1) // C: a critical option (OVN's type 0x80) follows
  geneve.writeUInt16BE(ETH_BRIDGING, 2)
  geneve.writeUIntBE(f.datapathKey & 0xffffff, 4, 3)
  const outerUdp = udp(50000, GENEVE_PORT, Buffer.concat([geneve, option, frame]))
  return ipv4(f.src, f.dst, outerUdp)
}

/**
 * Sends `f` from interface `ifname` of namespace `netns` (the fabric router's `eth0`) in
 * an Ethernet frame to `dstMac` (the receiving DPU's uplink bridge), from the interface's
 * own MAC address.
 */
export async function sendForgedGeneve(
  netns: string,
  ifname: string,
  dstMac: string,
  f: ForgedGeneve,
): Promise<void> {
  const send = [
    'import socket, sys',
    'ifname, dst, packet = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])',
    "src = bytes.fromhex(open(f'/sys/class/net/{ifname}/address').read().strip().replace(':', ''))",
    's = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)',
    's.bind((ifname, 0))',
    "s.send(dst + src + b'\\x08\\x00' + packet)",
  ].join('\n')
  const packet = forgedGenevePacket(f).toString('hex')
  await netnsExec(netns, 'python3', '-c', send, ifname, mac(dstMac).toString('hex'), packet)
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2)
  b.writeUInt16BE(n)
  return b
}

function mac(text: string): Buffer {
  return Buffer.from(text.split(':').map((h) => Number.parseInt(h, 16)))
}

function ipBytes(text: string): Buffer {
  return Buffer.from(text.split('.').map(Number))
}

/** A UDP datagram without checksum (0: none, as IPv4 allows). */
function udp(srcPort: number, dstPort: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(8)
  header.writeUInt16BE(srcPort, 0)
  header.writeUInt16BE(dstPort, 2)
  header.writeUInt16BE(8 + payload.length, 4)
  return Buffer.concat([header, payload])
}

/** An IPv4 packet (TTL 64, protocol UDP) with its header checksum. */
function ipv4(src: string, dst: string, payload: Buffer): Buffer {
  const header = Buffer.alloc(20)
  header.writeUInt8(0x45, 0)
  header.writeUInt16BE(20 + payload.length, 2)
  header.writeUInt8(64, 8)
  header.writeUInt8(17, 9)
  ipBytes(src).copy(header, 12)
  ipBytes(dst).copy(header, 16)
  header.writeUInt16BE(headerChecksum(header), 10)
  return Buffer.concat([header, payload])
}

function headerChecksum(header: Buffer): number {
  let sum = 0
  for (let i = 0; i < header.length; i += 2) sum += header.readUInt16BE(i)
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16)
  return ~sum & 0xffff
}
