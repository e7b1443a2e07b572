/**
 * How a lab test starts: run as root (CI, where bootstrap installs every binary), the lab
 * is expected to work — if it cannot start (a missing binary, no network namespaces) the
 * test fails and says why, so a broken lab never passes as a skip. Only without root is it
 * skipped, with the same reason, when it cannot start.
 */
import t, { type Test } from 'tap'
import { labUnavailable } from '../../infra/lab/lab.ts'

/** `t.test(name, body)` for a test that needs the lab, as the file header says. */
export async function labTest(name: string, body: (t: Test) => Promise<void>): Promise<void> {
  const why = await labUnavailable()
  const skip = why && process.getuid?.() !== 0 ? `not root, and ${why}` : false
  await t.test(name, { skip }, async (t) => {
    if (why) {
      t.fail(`the lab cannot start as root: ${why}`)
      return
    }
    await body(t)
  })
}
