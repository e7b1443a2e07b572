/**
 * `GET /v1/trace` in the OpenAPI description (`openapi.ts`): its parameters, and the
 * `TraceAnswer` schema (`app/trace-answer.ts` is the type it describes).
 */
import { errors, json, ref } from './openapi-parts.ts'

const strings = { type: 'array', items: { type: 'string' } }
const object = (properties: Record<string, object>, required: string[] = []) => ({
  type: 'object',
  required,
  properties,
})

export const tracePath = {
  get: {
    description:
      "where a packet goes, as ovn-trace sees it in the source group's own OVN central (read-only: nothing is written). `from` a host: the packet that host sends (its port, MAC and address; the destination's MAC on its own subnet, else its router's), to a host of its group (that host's address), a host of another group (the address the fabric reaches it at) or any address — an address is always the source group's, whatever other groups use it. `from=fabric`: a packet from the fabric (198.51.100.1, or 2001:db8:ffff::1 to an IPv6 address) to a public IP or NAT IP of either family, entering by the localnet port of the DPU that owns it. A tenant traces only its own hosts and their addresses (others' are 404).",
    parameters: [
      {
        name: 'from',
        in: 'query',
        required: true,
        description: 'a host (managed resource) name, or `fabric`',
        schema: { type: 'string' },
      },
      {
        name: 'to',
        in: 'query',
        required: true,
        description:
          'a host name or an IP address (with `from=fabric`: a public IP or NAT IP, IPv4 or IPv6)',
        schema: { type: 'string' },
      },
      {
        name: 'proto',
        in: 'query',
        description: 'default icmp (an echo request); tcp is a SYN',
        schema: { enum: ['icmp', 'tcp', 'udp'] },
      },
      {
        name: 'port',
        in: 'query',
        description: 'the destination port; required with tcp and udp, refused with icmp',
        schema: { type: 'integer', minimum: 1, maximum: 65535 },
      },
      {
        name: 'raw',
        in: 'query',
        description: "true: each trace's ovn-trace output in `traces[].raw`",
        schema: { type: 'boolean' },
      },
    ],
    responses: {
      '200': { description: 'the verdict', content: json(ref('TraceAnswer')) },
      ...errors(400, 401, 404, 409),
      '503': {
        description: "the group's central or ovn-trace does not answer now (TRACE_UNAVAILABLE)",
        content: json(ref('Error')),
      },
    },
  },
}

export const traceSchemas = {
  TraceAnswer: object(
    {
      verdict: {
        enum: ['delivered', 'answered', 'dropped', 'leaves', 'unresolved', 'inconclusive'],
        description:
          'delivered: it reaches a port (a host); answered: a router answers it itself; dropped: a pipeline stage drops it; leaves: it goes to the fabric through a DPU localnet port; unresolved: a MAC nothing answers ARP for; inconclusive: ovn-trace stops at an action it does not follow. The details are under the same name.',
      },
      delivered: object({
        port: { type: 'string' },
        host: { type: 'string' },
        group: { type: 'string' },
      }),
      answered: object({ router: { type: 'string' } }),
      dropped: object({
        datapath: { type: 'string' },
        stage: { type: 'string', examples: ['9. ls_in_acl'] },
        match: { type: 'string' },
        reason: { type: 'string' },
      }),
      leaves: object({
        port: { type: 'string' },
        dpu: { type: 'string' },
        source: { type: 'string', description: 'the source address after SNAT' },
        arp: {
          ...object({ target: { type: 'string' }, port: { type: 'string' } }),
          description:
            'the next hop MAC is not known yet: this ARP request leaves first, the packet once it is answered',
        },
      }),
      unresolved: object({
        target: { type: 'string' },
        datapath: { type: 'string' },
        reached: strings,
      }),
      inconclusive: object({
        datapath: { type: 'string' },
        stage: { type: 'string' },
        action: { type: 'string' },
      }),
      summary: { type: 'string' },
      from: {
        type: 'object',
        description:
          'a host (`host`, `group`, `port`, `mac`, `ip`, `dpu`, `boundTo`) or the fabric (`fabric`, `ip`, `dpu`, `port`)',
      },
      to: object({ ip: { type: 'string' }, host: { type: 'string' }, group: { type: 'string' } }),
      hops: { ...strings, description: 'each datapath the packet crosses, in plain words' },
      notes: strings,
      traces: {
        type: 'array',
        items: object({
          central: { type: 'string' },
          datapath: { type: 'string' },
          flow: { type: 'string', description: 'the microflow given to ovn-trace' },
          raw: { type: 'string', description: 'with `raw=true`: what ovn-trace printed' },
        }),
      },
    },
    ['verdict', 'summary', 'from', 'to', 'hops', 'notes', 'traces'],
  ),
}
