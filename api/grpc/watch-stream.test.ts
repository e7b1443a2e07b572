/**
 * One Watch stream against a fake call, change log and store: snapshot then BOOKMARK then
 * live changes; resuming (coalesced catching up, removals a tenant may see, a version the
 * log no longer keeps); and flow control — no write while the call has not drained, and
 * a stream too far behind ended with RESOURCE_EXHAUSTED.
 */
import { EventEmitter } from 'node:events'
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import type { Operations } from '../../app/index.ts'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import {
  type Change,
  type ChangeListener,
  compareVersions,
  ResourceVersionTooOld,
} from '../../lib/state/changes.ts'
import type { WatchResponse } from '../../proto/gen/hydrazine/v1/WatchResponse.ts'
import { errorStatus } from './status.ts'
import { runWatchStream, type WatchCall, type WatchStreamDeps } from './watch-stream.ts'

const group = (name: string, tenantId: string, observedVersion = 0): ResourceGroup => ({
  name,
  spec: { tenantId, network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' } },
  specVersion: 1,
  status: {
    phase: 'Provisioning',
    conditions: [],
    snatIPs: [],
    managedResourceCount: 0,
    observedVersion,
    configsSynced: false,
  },
  createdAt: '2024-01-01T00:00:00.000Z',
  updatedAt: '2024-01-01T00:00:00.000Z',
})

/** A store of groups, a change log and a call, all in memory. */
function world(options: { tenant?: string; log?: Change[]; position?: string } = {}) {
  const groups = new Map<string, ResourceGroup>()
  const listeners = new Set<ChangeListener>()
  const written: WatchResponse[] = []
  let writable = true
  const emitter = new EventEmitter()
  const ended: { status?: Partial<grpc.StatusObject>; ok?: boolean } = {}
  emitter.on('error', (status: Partial<grpc.StatusObject>) => {
    ended.status = status
  })
  const call = Object.assign(emitter, {
    request: { kind: 'OBJECT_KIND_UNSPECIFIED', name: '', resourceVersion: '' },
    cancelled: false,
    write(message: WatchResponse) {
      written.push(message)
      return writable
    },
    end() {
      ended.ok = true
    },
  }) as unknown as WatchCall & { request: { resourceVersion: string; name: string } }
  const visible = (g: ResourceGroup | undefined) =>
    g && (options.tenant === undefined || g.spec.tenantId === options.tenant) ? g : undefined
  const ops = {
    visibleGroup: async (n: string) => visible(groups.get(n)),
    visibleHost: async () => undefined,
    listGroups: async () => ({
      items: [...groups.values()]
        .filter((g) => visible(g))
        .sort((a, b) => (a.name < b.name ? -1 : 1)),
    }),
    listHosts: async () => ({ items: [] }),
  } as unknown as Operations
  const log = options.log ?? []
  const deps: WatchStreamDeps = {
    client: {
      watchChanges: async (listener) => {
        listeners.add(listener)
        return { position: options.position ?? '10-0', stop: () => listeners.delete(listener) }
      },
      changesSince: async (after, count) => {
        if (compareVersions(after, '2-0') < 0) throw new ResourceVersionTooOld(after)
        return log.filter((c) => compareVersions(c.version, after) > 0).slice(0, count)
      },
    },
    ops,
    tenant: options.tenant,
    failure: (error) => errorStatus(error, () => {}),
    backlog: 3,
  }
  const change = (c: Change) => {
    for (const l of listeners) l(c)
  }
  const settle = () => new Promise((r) => setTimeout(r, 20))
  const events = () =>
    written.map((w) =>
      [w.type?.toString().slice('WATCH_EVENT_TYPE_'.length), w.name, w.resourceVersion]
        .filter(Boolean)
        .join(' '),
    )
  return {
    groups,
    call,
    deps,
    change,
    settle,
    events,
    ended,
    setWritable(w: boolean) {
      writable = w
    },
  }
}

t.test('snapshot, bookmark, then changes as they come', async (t) => {
  const w = world()
  w.groups.set('a', group('a', 't1'))
  w.groups.set('b', group('b', 't2'))
  runWatchStream(w.call, w.deps, () => {})
  await w.settle()
  t.same(w.events(), ['ADDED a 10-0', 'ADDED b 10-0', 'BOOKMARK 10-0'])
  w.groups.set('a', group('a', 't1', 1))
  w.change({ kind: 'rg', name: 'a', version: '11-0' })
  w.change({ kind: 'rg', name: 'b', version: '12-0' })
  await w.settle()
  w.groups.delete('b')
  w.change({ kind: 'rg', name: 'b', version: '13-0', removed: { tenant: 't2' } })
  await w.settle()
  t.same(
    w.events().slice(3),
    ['MODIFIED a 11-0', 'DELETED b 13-0'],
    'an unchanged object is skipped',
  )
})

t.test('resuming: the changes after the version, once per object, no snapshot', async (t) => {
  const log: Change[] = [
    { kind: 'rg', name: 'a', version: '3-0' },
    { kind: 'rg', name: 'b', version: '4-0' },
    { kind: 'rg', name: 'a', version: '5-0' },
    { kind: 'rg', name: 'gone', version: '6-0', removed: { tenant: 't1' } },
    { kind: 'rg', name: 'theirs', version: '7-0', removed: { tenant: 't2' } },
    { kind: 'rg', name: 'later', version: '11-0' },
  ]
  const w = world({ tenant: 't1', log })
  for (const n of ['a', 'b', 'c', 'later']) w.groups.set(n, group(n, n === 'b' ? 't2' : 't1'))
  w.call.request.resourceVersion = '2-0'
  runWatchStream(w.call, w.deps, () => {})
  await w.settle()
  t.same(
    w.events(),
    ['ADDED a 5-0', 'DELETED gone 6-0', 'BOOKMARK 10-0'],
    "a once, at its last change; its own removal; nothing of another tenant's; none after the position",
  )

  const old = world({ log })
  old.call.request.resourceVersion = '1-0'
  runWatchStream(old.call, old.deps, () => {})
  await old.settle()
  t.equal(old.ended.status?.code, grpc.status.OUT_OF_RANGE, 'a version no longer kept')
  t.match(old.ended.status?.details, /list again/)

  const bad = world()
  bad.call.request.resourceVersion = 'yesterday'
  runWatchStream(bad.call, bad.deps, () => {})
  await bad.settle()
  t.equal(bad.ended.status?.code, grpc.status.INVALID_ARGUMENT)
  t.match(bad.ended.status?.metadata?.get('hz-issues'), [/resource_version/])
})

t.test('flow control: waits for drain, ends a stream too far behind', async (t) => {
  const w = world()
  for (const n of ['a', 'b', 'c']) w.groups.set(n, group(n, 't1'))
  w.setWritable(false)
  let ended = 0
  runWatchStream(w.call, w.deps, () => ended++)
  await w.settle()
  t.same(w.events(), ['ADDED a 10-0'], 'one write, then it waits for the call to drain')
  w.setWritable(true)
  w.call.emit('drain')
  await w.settle()
  t.same(w.events(), ['ADDED a 10-0', 'ADDED b 10-0', 'ADDED c 10-0', 'BOOKMARK 10-0'])

  w.setWritable(false)
  for (const [i, n] of ['a', 'b', 'c', 'a', 'b'].entries()) {
    w.groups.set(n, group(n, 't1', i + 1))
    w.change({ kind: 'rg', name: n, version: `${20 + i}-0` })
  }
  await w.settle()
  t.equal(w.ended.status?.code, grpc.status.RESOURCE_EXHAUSTED, 'more than 3 waiting: ended')
  t.equal(ended, 1, 'and counted as ended once')
})
