/**
 * A throwaway certificate authority for tests, made with `openssl`: a CA and leaf
 * certificates (CN, SANs, both server and client use), as PEM files in a directory.
 */
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { run } from '../../infra/lab/dpu.ts'

export interface TestCa {
  /** The CA certificate (PEM file). */
  readonly ca: string
  /** Issues a certificate with this CN (and SANs `DNS:<cn>`, `IP:127.0.0.1`, `extra`). */
  issue(cn: string, extra?: readonly string[]): Promise<{ cert: string; key: string }>
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

/** Makes a CA named `name` in `dir`. */
export async function makeCa(dir: string, name: string): Promise<TestCa> {
  const ca = join(dir, `${name}.pem`)
  const caKey = join(dir, `${name}.key`)
  await run('openssl', [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    caKey,
    '-out',
    ca,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
  ])
  let serial = 1
  return {
    ca,
    async issue(cn, extra = []) {
      const base = join(dir, `${name}-${cn}-${serial}`)
      const [key, csr, cert, ext] = ['key', 'csr', 'pem', 'ext'].map((x) => `${base}.${x}`) as [
        string,
        string,
        string,
        string,
      ]
      await writeFile(
        ext,
        [
          'basicConstraints=CA:FALSE',
          'keyUsage=digitalSignature,keyEncipherment',
          'extendedKeyUsage=serverAuth,clientAuth',
          `subjectAltName=${[`DNS:${cn}`, 'IP:127.0.0.1', ...extra].join(',')}`,
        ].join('\n'),
      )
      await run('openssl', [
        'req',
        '-new',
        ...EC,
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        `/CN=${cn}`,
      ])
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        ca,
        '-CAkey',
        caKey,
        '-set_serial',
        String(serial++),
        '-out',
        cert,
        '-days',
        '2',
        '-extfile',
        ext,
      ])
      return { cert, key }
    },
  }
}
