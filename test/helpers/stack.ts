import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import {
  type LocalStack,
  type LocalStackOptions,
  startLocalStack,
} from '../../infra/local/stack.ts'

const run = promisify(execFile)

/** The part of a tap `Test` these helpers need. */
export interface Teardown {
  teardown(fn: () => void | Promise<void>): void
}

/** A fresh temp directory, removed when the test ends. */
export async function tempDir(t: Teardown, prefix = 'hz-test-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/**
 * Starts a private embedded stack (by default Redis only) in a temp directory and stops
 * it when the test ends, whether it passed or not.
 *
 * @example
 * const stack = await withStack(t, { ovn: true })
 * const redis = new Redis(stack.redis.url)
 */
export async function withStack(
  t: Teardown,
  options: Omit<LocalStackOptions, 'dataDir'> = {},
): Promise<LocalStack> {
  const dataDir = await tempDir(t)
  const stack = await startLocalStack({ redis: true, ovn: false, frr: false, ...options, dataDir })
  t.teardown(() => stack.stop())
  return stack
}

/**
 * New connections to the Redis at `url` as BullMQ's workers and queues want them
 * (`maxRetriesPerRequest: null`), every one disconnected when the test ends (BullMQ
 * closes none it was given, and one left open keeps the test's process alive).
 *
 * @example
 * const connection = redisConnections(t, stack.redis.url)
 * const queue = new Queue('q', { connection: connection() })
 */
export function redisConnections(t: Teardown, url: string): () => Redis {
  const connections: Redis[] = []
  t.teardown(() => {
    for (const redis of connections) redis.disconnect()
  })
  return () => {
    const redis = new Redis(url, { maxRetriesPerRequest: null })
    connections.push(redis)
    return redis
  }
}

/**
 * A non-loopback address on a bridge of its own of this machine (as root, like the lab and
 * agent tests), removed when the test ends.
 */
export async function dummyAddress(t: Teardown): Promise<string> {
  const link = `hzt${process.pid.toString(36)}`.slice(0, 15)
  const address = `100.127.${(process.pid >> 8) % 256}.${(process.pid % 250) + 2}`
  await run('ip', ['link', 'add', link, 'type', 'bridge'])
  t.teardown(async () => {
    await run('ip', ['link', 'del', link]).catch(() => {})
  })
  await run('ip', ['addr', 'add', `${address}/32`, 'dev', link])
  await run('ip', ['link', 'set', link, 'up'])
  return address
}
