/**
 * Asking an `ssl:` Southbound with a given client certificate, as a DPU would: whether it
 * admits the certificate, refuses it, or the question itself went wrong.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** PEM files of a client: its key, the certificate it presents, the CA it checks the SB by. */
export interface ClientFiles {
  readonly key: string
  readonly cert: string
  readonly ca: string
}

/** How an SB answered: its chassis names when it admitted the client. */
export type SouthboundAnswer =
  | { readonly state: 'admitted'; readonly chassis: readonly string[] }
  | { readonly state: 'refused' }
  | { readonly state: 'error'; readonly said: string }

/**
 * `admitted` (with the SB's chassis) when the SB at `remote` answers `ovn-sbctl`
 * presenting `client.cert`, `refused` when the TLS handshake breaks once the client's files
 * are loaded (the SB refused the certificate), else `error` with what ovn-sbctl said (a file
 * it could not load, a closed port, a timeout): a test that expects a refusal cannot pass
 * on a mistake of its own.
 */
export async function southboundAnswer(
  remote: string,
  client: ClientFiles,
  /** `relay`: the SB is a relay (never a raft leader), asked as ovn-controller asks it. */
  server: 'server' | 'relay' = 'server',
): Promise<SouthboundAnswer> {
  try {
    const { stdout } = await run('ovn-sbctl', [
      `--db=${remote}`,
      ...(server === 'relay' ? ['--no-leader-only'] : []),
      '--timeout=3',
      `--private-key=${client.key}`,
      `--certificate=${client.cert}`,
      `--ca-cert=${client.ca}`,
      '--bare',
      '--columns=name',
      'list',
      'Chassis',
    ])
    return { state: 'admitted', chassis: stdout.split('\n').filter(Boolean) }
  } catch (error) {
    const said = String((error as { stderr?: unknown }).stderr ?? error)
    // The connection broke in the TLS handshake once the files were loaded (the SB's
    // alert, `tlsv1 alert unknown ca`, reaches the client only when it reads before the
    // SB closes): not a file ovn-sbctl could not load, a closed port or a timeout.
    const broken =
      /database connection failed \((Input\/output error|Broken pipe|Protocol error|End of file|Connection reset by peer)\)/
    const refused = broken.test(said) && !/failed to load|No such file|SSL_use/i.test(said)
    return refused ? { state: 'refused' } : { state: 'error', said }
  }
}
