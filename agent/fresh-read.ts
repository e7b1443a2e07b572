/**
 * Reads of one source that many callers poll at once (a DPU's bgpd, asked by every host's
 * configure and by the heartbeat): at most one read runs, and a caller is only ever given
 * a read that began after it asked — so a caller waiting for a route to go is never told
 * "gone" by a read taken before it was added. The callers who ask while a read runs share
 * the next one.
 */
export class FreshRead<T> {
  #current: Promise<T> | undefined
  #next: Promise<T> | undefined

  constructor(private readonly fetch: () => Promise<T>) {}

  /** A read that begins at or after this call. */
  read(): Promise<T> {
    const running = this.#current
    if (!running) return this.#start()
    this.#next ??= running
      .catch(() => undefined)
      .then(() => {
        this.#next = undefined
        return this.#start()
      })
    return this.#next
  }

  #start(): Promise<T> {
    const read = this.fetch().finally(() => {
      if (this.#current === read) this.#current = undefined
    })
    this.#current = read
    return read
  }
}
