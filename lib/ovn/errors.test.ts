import t from 'tap'
import { certificateRefused, OvsdbConnectionError } from './errors.ts'

const tlsError = (code: string) => Object.assign(new Error(code), { code })

t.test(
  'a certificate refused by either side is told apart from a server that may come back',
  async (t) => {
    const cases: [string, unknown, string | undefined][] = [
      [
        "the server's certificate does not verify",
        new OvsdbConnectionError(
          'ssl:10.0.0.1:6642',
          'could not connect',
          tlsError('UNABLE_TO_VERIFY_LEAF_SIGNATURE'),
        ),
        'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      ],
      [
        "the server's alert: our certificate is of a CA it does not trust",
        new OvsdbConnectionError(
          'ssl:10.0.0.1:6642',
          'connection lost',
          tlsError('ERR_SSL_TLSV1_ALERT_UNKNOWN_CA'),
        ),
        'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
      ],
      [
        'refused connection',
        new OvsdbConnectionError('ssl:x', 'could not connect', tlsError('ECONNREFUSED')),
        undefined,
      ],
      ['lost without a cause', new OvsdbConnectionError('ssl:x', 'connection lost'), undefined],
      ['not an error', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', undefined],
    ]
    for (const [what, error, code] of cases) t.equal(certificateRefused(error), code, what)
  },
)
