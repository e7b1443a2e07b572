/** Crash safety of group.delete: a worker SIGKILLed at each of its checkpoints. */
import t from 'tap'
import { crashPoints } from './crash-points.ts'

t.test('crash safety: SIGKILL inside group.delete', (t) => crashPoints(t, 'delete'))
