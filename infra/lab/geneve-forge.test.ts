import t from 'tap'
import { forgedGenevePacket } from './geneve-forge.ts'

t.test('a forged Geneve frame is laid out as an OVN chassis sends one', async (t) => {
  const packet = forgedGenevePacket({
    src: '100.64.3.2',
    dst: '100.64.3.3',
    datapathKey: 0x123456,
    inportKey: 2,
    outportKey: 3,
    inner: {
      srcMac: '0a:00:00:00:0a:01',
      dstMac: '0a:00:00:00:0a:02',
      srcIp: '10.10.10.11',
      dstIp: '10.10.10.12',
      dstPort: 7777,
      payload: 'hz-forged',
    },
  })
  t.equal(packet.readUInt16BE(2), packet.length, 'outer IPv4 total length')
  t.same(
    [...packet.subarray(12, 20)],
    [100, 64, 3, 2, 100, 64, 3, 3],
    'outer source: the DPU named',
  )
  t.equal(packet.readUInt8(9), 17, 'UDP')
  t.equal(packet.readUInt16BE(22), 6081, 'to the Geneve port')
  const geneve = packet.subarray(28)
  t.equal(geneve.readUInt8(0), 2, 'version 0, 8 bytes of options')
  t.equal(geneve.readUInt8(1), 0x40, 'C: a critical option follows, as OVN sends it')
  t.equal(geneve.readUInt16BE(2), 0x6558, 'an Ethernet frame inside')
  t.equal(geneve.readUIntBE(4, 3), 0x123456, 'VNI: the datapath key')
  t.equal(geneve.readUInt16BE(8), 0x0102, "OVN's option class")
  t.equal(geneve.readUInt8(10), 0x80, "OVN's option type")
  t.equal(geneve.readUInt32BE(12), (2 << 16) | 3, 'ingress port key, egress port key')
  const frame = geneve.subarray(16)
  t.equal(frame.subarray(0, 6).toString('hex'), '0a0000000a02', 'to the host')
  t.equal(frame.readUInt16BE(12), 0x0800)
  const checksumHolds = (header: Buffer) => {
    let sum = 0
    for (let i = 0; i < 20; i += 2) sum += header.readUInt16BE(i)
    while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16)
    return sum === 0xffff
  }
  t.ok(checksumHolds(packet.subarray(0, 20)), 'outer IPv4 header checksum holds')
  t.ok(checksumHolds(frame.subarray(14, 34)), 'inner IPv4 header checksum holds')
  t.equal(frame.subarray(42).toString(), 'hz-forged', 'the payload the host is watched for')
})
