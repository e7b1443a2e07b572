/**
 * `hz watch [group|host] [NAME] [--until PHASE] [--timeout S]`: the gRPC `Watch` stream,
 * one line per change. A dropped stream is resumed from the last resource version it
 * delivered (a version the server no longer keeps starts over from the current state),
 * so nothing is missed across reconnects. With `--until`, exits 0 once the watched
 * object reaches that phase, 1 if `--timeout` passes first.
 */
import * as grpc from '@grpc/grpc-js'
import { createHydrazineClient, type WatchEvent } from '../../api/grpc/protocol.ts'
import { ApiError } from './api.ts'
import { at } from './format.ts'

export interface WatchOptions {
  /** `host:port` of the gRPC API. */
  readonly address: string
  readonly tls: boolean
  readonly token: string
  readonly kind?: 'OBJECT_KIND_RESOURCE_GROUP' | 'OBJECT_KIND_MANAGED_RESOURCE'
  readonly name?: string
  readonly until?: string
  readonly timeoutMs?: number
  readonly json: boolean
  readonly out: (line: string) => void
}

const RETRY_MS = 500

/** Resolves with the exit code: 0 (reached `until`, or the stream was stopped), 1 (timeout). */
export function watch(options: WatchOptions): Promise<number> {
  const client = createHydrazineClient(
    options.address,
    options.tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure(),
  )
  const metadata = new grpc.Metadata()
  metadata.set('authorization', `Bearer ${options.token}`)
  let version = ''
  let stream: grpc.ClientReadableStream<WatchEvent> | undefined
  let done = false

  return new Promise<number>((resolve, reject) => {
    const finish = (code: number) => {
      if (done) return
      done = true
      clearTimeout(timer)
      stream?.cancel()
      client.close()
      resolve(code)
    }
    const timer = options.timeoutMs
      ? setTimeout(() => {
          options.out(`timed out waiting for ${options.until ?? 'the end'}`)
          finish(1)
        }, options.timeoutMs)
      : undefined
    process.once('SIGINT', () => finish(0))

    const open = () => {
      if (done) return
      const s = client.watch(
        {
          ...(options.kind ? { kind: options.kind } : {}),
          ...(options.name ? { name: options.name } : {}),
          resourceVersion: version,
        },
        metadata,
      )
      stream = s
      s.on('data', (event: WatchEvent) => {
        version = event.resourceVersion || version
        if (event.type === 'WATCH_EVENT_TYPE_BOOKMARK') return
        const object = event.resourceGroup ?? event.managedResource
        const phase = at(object, 'status.phase')
        options.out(
          options.json
            ? JSON.stringify(event)
            : [
                new Date().toISOString(),
                event.type.replace('WATCH_EVENT_TYPE_', ''),
                `${event.kind === 'OBJECT_KIND_RESOURCE_GROUP' ? 'group' : 'host'}/${event.name}`,
                typeof phase === 'string' ? phaseName(phase) : '',
              ].join('  '),
        )
        if (options.until && typeof phase === 'string' && phaseName(phase) === options.until) {
          finish(0)
        }
      })
      s.on('error', (error: grpc.ServiceError) => {
        if (done || error.code === grpc.status.CANCELLED) return
        if (error.code === grpc.status.OUT_OF_RANGE) {
          // The server no longer keeps our version: start over from the current state.
          version = ''
          setTimeout(open, 0)
          return
        }
        if (error.code === grpc.status.UNAVAILABLE) {
          setTimeout(open, RETRY_MS)
          return
        }
        done = true
        clearTimeout(timer)
        client.close()
        reject(new ApiError(0, grpc.status[error.code] ?? 'GRPC', error.details || error.message))
      })
      s.on('end', () => {
        if (!done) setTimeout(open, RETRY_MS)
      })
    }
    open()
  })
}

/** `MANAGED_RESOURCE_PHASE_READY` → `Ready`, as the HTTP API spells phases. */
function phaseName(phase: string): string {
  const word = phase.replace(/^[A-Z_]+_PHASE_/, '')
  return word.charAt(0) + word.slice(1).toLowerCase()
}
