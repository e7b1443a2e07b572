/**
 * A wait bounded in time that leaves nothing behind: the timer that bounds it is cleared
 * as soon as the wait is over, either way. A timer left pending would keep Node's process
 * (a test file, `npm start` on its way out) alive until it fires.
 */

/**
 * `work`'s value, or `late` when `ms` pass first. A rejection of `work` before then is
 * passed on.
 *
 * @example
 * const gone = await within(exited.then(() => true), 5000, false)
 */
export async function within<T, U>(work: Promise<T>, ms: number, late: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      work,
      new Promise<U>((resolve) => {
        timer = setTimeout(() => resolve(late), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}
