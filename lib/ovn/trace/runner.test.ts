import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { TraceUnavailable } from './errors.ts'
import { createOvnTrace } from './runner.ts'

/** A stand-in for the ovn-trace binary: a shell script doing `body`. */
async function fakeBinary(t: Test, body: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hz-ovn-trace-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'ovn-trace')
  await writeFile(file, `#!/bin/sh\n${body}\n`)
  await chmod(file, 0o755)
  return file
}

t.test('the arguments: the remote, the detailed format, the datapath and the flow', async (t) => {
  const binary = await fakeBinary(t, `echo "# icmp"; for a in "$@"; do echo "[$a]"; done`)
  const out = await createOvnTrace({ binary })('unix:/run/sb.sock', 'hz/g/ls', 'inport == "x"')
  t.equal(out, '# icmp\n[--db=unix:/run/sb.sock]\n[--detailed]\n[--]\n[hz/g/ls]\n[inport == "x"]\n')
})

t.test('what is not a trace is refused as unavailable, saying why', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['a bad datapath', 'echo \'unknown datapath "hz/g/nope"\'', /unknown datapath "hz\/g\/nope"/],
    ['a failure', 'echo "database connection failed" >&2; exit 1', /database connection failed/],
    ['no answer', 'sleep 5', /no answer within 200 ms/],
  ]
  for (const [name, body, message] of cases) {
    const binary = await fakeBinary(t, body)
    await t.rejects(
      createOvnTrace({ binary, timeoutMs: 200 })('tcp:127.0.0.1:6642', 'dp', 'flow'),
      { name: TraceUnavailable.name, code: 'TRACE_UNAVAILABLE', message },
      name,
    )
  }
})

t.test('an ssl: Southbound without certificates is refused before running', async (t) => {
  const binary = await fakeBinary(t, 'echo "# icmp"')
  await t.rejects(createOvnTrace({ binary })('ssl:10.0.0.1:6642', 'dp', 'flow'), {
    message: /needs certificates/,
  })
  const tls = { key: '/k.pem', cert: '/c.pem', ca: '/ca.pem' }
  const echo = await fakeBinary(t, 'echo "# icmp $1 $2 $3 $4"')
  t.equal(
    await createOvnTrace({ binary: echo, tls })('ssl:10.0.0.1:6642', 'dp', 'flow'),
    '# icmp --db=ssl:10.0.0.1:6642 --private-key=/k.pem --certificate=/c.pem --ca-cert=/ca.pem\n',
  )
  await t.rejects(createOvnTrace({ binary })('nowhere', 'dp', 'flow'), {
    message: /not an OVSDB remote/,
  })
})

t.test('at most maxConcurrent traces run at once; the others wait their turn', async (t) => {
  const binary = await fakeBinary(t, 'echo "# $(date +%s%N)"; sleep 0.2; echo "$(date +%s%N)"')
  const trace = createOvnTrace({ binary, maxConcurrent: 1 })
  const spans = (await Promise.all([1, 2, 3].map(() => trace('unix:/sb', 'dp', 'flow')))).map(
    (out) => out.replace('# ', '').trim().split('\n').map(BigInt),
  )
  spans.sort((a, b) => Number((a[0] ?? 0n) - (b[0] ?? 0n)))
  for (let i = 1; i < spans.length; i++) {
    t.ok(
      (spans[i]?.[0] ?? 0n) >= (spans[i - 1]?.[1] ?? 0n),
      `trace ${i + 1} started after ${i} ended`,
    )
  }
})
