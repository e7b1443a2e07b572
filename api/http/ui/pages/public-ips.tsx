/** `/ui/public-ips` (operators only): the public IP pool, allocated addresses first. */
import type { PublicIp } from '../../../../lib/model/objects.ts'
import { type Frame, Layout, Phase } from '../layout.tsx'
import type { Bounded } from './overview.tsx'

export function PublicIpsPage(props: { frame: Frame; ips: Bounded<PublicIp> }) {
  const { items, more } = props.ips
  const allocated = items.filter((p) => p.allocated).length
  return (
    <Layout title="Public IPs" frame={props.frame} nav="public-ips" page="public-ips">
      <h1 id="public-ips">Public IPs</h1>
      <p class="lead">{`${items.length} in the pool${more ? '+' : ''}: ${allocated} allocated, ${items.length - allocated} free.`}</p>
      {items.length === 0 ? (
        <p>The pool is empty: PublicAccess hosts stay Failed until an address is registered.</p>
      ) : (
        <table aria-labelledby="public-ips">
          <thead>
            <tr>
              <th scope="col">Address</th>
              <th scope="col">State</th>
              <th scope="col">Allocated to</th>
            </tr>
          </thead>
          <tbody>
            {items.map((p) => (
              <tr>
                <th scope="row" class="mono">
                  {p.ip}
                </th>
                <td>
                  <Phase phase={p.allocated ? 'Allocated' : 'Free'} />
                </td>
                <td>
                  {p.allocatedTo ? (
                    <a href={`/ui/hosts/${encodeURIComponent(p.allocatedTo)}`}>{p.allocatedTo}</a>
                  ) : p.heldUntilIsolatedBy ? (
                    <>
                      {'held until DPU '}
                      <a href={`/ui/dpus/${encodeURIComponent(p.heldUntilIsolatedBy.dpu)}`}>
                        {p.heldUntilIsolatedBy.dpu}
                      </a>
                      {` confirms isolation of host ${p.heldUntilIsolatedBy.host}`}
                    </>
                  ) : (
                    '—'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Layout>
  )
}
