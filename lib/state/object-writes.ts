/**
 * The writes every kind of object takes the same way: its status (read-modify-write, with
 * the events the change makes written together with it) and a deletion request.
 */

import { isObserved, transitionEvents } from '../model/events.ts'
import type { StoredObject } from '../model/objects.ts'
import type { ObjectDeletion } from './deletion.ts'
import type { EventLog } from './events.ts'
import type { KeptObject, ObjectRecords } from './object-records.ts'
import type { Kind } from './store-keys.ts'

export class ObjectWrites {
  readonly #records: ObjectRecords
  readonly #events: EventLog
  readonly #deletion: ObjectDeletion

  constructor(records: ObjectRecords, events: EventLog, deletion: ObjectDeletion) {
    this.#records = records
    this.#events = events
    this.#deletion = deletion
  }

  /**
   * Read-modify-write of an object's status, retried on concurrent writes. `update`
   * gets the current object and returns the new status, or undefined to leave it.
   * `known`: the object as the caller read it (`casField`), so that it is not read again
   * unless it changed.
   */
  async updateStatus<S>(
    kind: Kind,
    name: string,
    update: (current: StoredObject<unknown, S>) => S | undefined,
    known?: KeptObject<StoredObject<unknown, S>>,
  ): Promise<S | undefined> {
    // The events a change makes are written with it: whoever sees the new status (or
    // hears of it in the change log) finds its events there too.
    return this.#records.casField<S, S>(
      kind,
      name,
      'status',
      update,
      (current, next) =>
        isObserved(next)
          ? this.#events.batch(
              kind,
              name,
              transitionEvents(isObserved(current.status) ? current.status : undefined, next),
            )
          : undefined,
      known,
    )
  }

  /**
   * Marks an object for deletion (idempotent; `force` can be raised, never lowered).
   * Returns the object, or undefined when there is none.
   */
  requestDeletion(
    kind: Kind,
    name: string,
    force: boolean,
  ): Promise<StoredObject<unknown, unknown> | undefined> {
    return this.#deletion.request(kind, name, force)
  }
}
