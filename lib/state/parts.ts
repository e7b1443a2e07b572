/**
 * What the store's repositories share: one Redis, one key layout, the object records, the
 * spec writes (claims, guards, quotas), the event log, status writes and deletion.
 * `StateStore` builds them once and hands each repository the parts it uses.
 */
import type { RedisClient } from '../redis/connection.ts'
import type { ObjectDeletion } from './deletion.ts'
import type { EventLog } from './events.ts'
import type { ObjectRecords } from './object-records.ts'
import type { ObjectWrites } from './object-writes.ts'
import type { SpecWrites } from './spec-writes.ts'
import type { StoreKeys } from './store-keys.ts'

export interface StoreParts {
  readonly redis: RedisClient
  readonly keys: StoreKeys
  readonly records: ObjectRecords
  readonly specs: SpecWrites
  readonly events: EventLog
  readonly writes: ObjectWrites
  readonly deletion: ObjectDeletion
}
