/** Crash safety of host.attach: a worker SIGKILLed at each of its checkpoints. */
import t from 'tap'
import { crashPoints } from './crash-points.ts'

t.test('crash safety: SIGKILL inside host.attach', (t) => crashPoints(t, 'attach'))
